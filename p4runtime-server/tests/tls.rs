//! Issue 10 item 13: the control channel over TLS and mutual TLS, with a throwaway CA, server
//! and client certificates made here.

use std::time::Duration;

use p4runtime_server::proto::p4::v1 as p4;
use p4runtime_server::proto::p4::v1::p4_runtime_client::P4RuntimeClient;
use p4runtime_server::server::{DeviceIo, Running, ServerConfig, Service, Tls, serve_with};
use pipeline::runtime::{Config, Pipeline};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

/// A certificate and its key, PEM.
struct Pem {
    cert: String,
    key: String,
}

struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        Ca { issuer }
    }

    fn pem(&self) -> String {
        self.issuer.pem()
    }

    fn issue(&self, name: &str, usage: ExtendedKeyUsagePurpose) -> Pem {
        let mut params = CertificateParams::new(vec![name.to_string()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![usage];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Pem {
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    }
}

fn server(tls: Tls) -> Running {
    let program = programs::by_name("basic").unwrap();
    let pipe = Pipeline::new(program, 1, Config::default());
    let io = DeviceIo::detached();
    let service = Service::new(pipe.control.clone(), io, ServerConfig::default());
    serve_with(service, "127.0.0.1:0".parse().unwrap(), Some(tls)).unwrap()
}

/// Capabilities over `scheme://localhost:port`, with `tls` if given: the API version, or what
/// went wrong.
async fn capabilities(running: &Running, tls: Option<ClientTlsConfig>) -> Result<String, String> {
    let scheme = if tls.is_some() { "https" } else { "http" };
    let url = format!("{scheme}://localhost:{}", running.addr.port());
    let mut endpoint = Endpoint::from_shared(url)
        .unwrap()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(5));
    if let Some(tls) = tls {
        endpoint = endpoint.tls_config(tls).map_err(|e| format!("tls: {e}"))?;
    }
    let channel = endpoint
        .connect()
        .await
        .map_err(|e| format!("connect: {e:?}"))?;
    let r = P4RuntimeClient::new(channel)
        .capabilities(p4::CapabilitiesRequest::default())
        .await
        .map_err(|s| format!("capabilities: {s:?}"))?;
    Ok(r.into_inner().p4runtime_api_version)
}

fn client_tls(ca: &Ca, identity: Option<&Pem>) -> ClientTlsConfig {
    let mut c = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca.pem()))
        .domain_name("localhost");
    if let Some(id) = identity {
        c = c.identity(Identity::from_pem(&id.cert, &id.key));
    }
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_serves_trusting_clients_only() {
    let ca = Ca::new("pisa test CA");
    let srv = ca.issue("localhost", ExtendedKeyUsagePurpose::ServerAuth);
    let running = server(Tls {
        cert_pem: srv.cert.into_bytes(),
        key_pem: srv.key.into_bytes(),
        client_ca_pem: None,
    });
    // A client that trusts the CA is served; no client certificate is needed.
    let v = capabilities(&running, Some(client_tls(&ca, None))).await;
    assert_eq!(v.as_deref(), Ok("1.5.0"));
    // Plaintext is not served, and a client trusting another CA refuses the server.
    let plain = capabilities(&running, None).await;
    assert!(plain.is_err(), "plaintext served: {plain:?}");
    let other = Ca::new("another CA");
    let r = capabilities(&running, Some(client_tls(&other, None))).await;
    assert!(
        r.is_err(),
        "a server certificate from an untrusted CA was accepted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_refuses_absent_and_untrusted_client_certificates() {
    let ca = Ca::new("pisa test CA");
    let srv = ca.issue("localhost", ExtendedKeyUsagePurpose::ServerAuth);
    let client_ca = Ca::new("pisa controllers CA");
    let controller = client_ca.issue("controller", ExtendedKeyUsagePurpose::ClientAuth);
    let running = server(Tls {
        cert_pem: srv.cert.into_bytes(),
        key_pem: srv.key.into_bytes(),
        client_ca_pem: Some(client_ca.pem().into_bytes()),
    });
    let v = capabilities(&running, Some(client_tls(&ca, Some(&controller)))).await;
    assert_eq!(v.as_deref(), Ok("1.5.0"));
    let none = capabilities(&running, Some(client_tls(&ca, None))).await;
    assert!(none.is_err(), "served without a client certificate");
    // A certificate of the right name, issued by a CA the switch does not trust.
    let rogue =
        Ca::new("pisa controllers CA").issue("controller", ExtendedKeyUsagePurpose::ClientAuth);
    let r = capabilities(&running, Some(client_tls(&ca, Some(&rogue)))).await;
    assert!(r.is_err(), "served with an untrusted client certificate");
    // The trusted client is still served.
    let v = capabilities(&running, Some(client_tls(&ca, Some(&controller)))).await;
    assert_eq!(v.as_deref(), Ok("1.5.0"));
}

#[test]
fn unusable_tls_files_fail_before_serving() {
    let program = programs::by_name("basic").unwrap();
    let pipe = Pipeline::new(program, 1, Config::default());
    let io = DeviceIo::detached();
    let service = Service::new(pipe.control.clone(), io, ServerConfig::default());
    let tls = Tls {
        cert_pem: b"not a certificate".to_vec(),
        key_pem: b"not a key".to_vec(),
        client_ca_pem: None,
    };
    let r = serve_with(service, "127.0.0.1:0".parse().unwrap(), Some(tls));
    assert!(r.is_err(), "served with garbage TLS files");
}
