// pisa-ns3: the TCP scenarios of pisa-sim, run in ns-3 (3.37), to compare the two side by side.
//
// Topologies (all links point-to-point, IPv4, routes by global routing):
//   dumbbell: senders h1..hN -- s1 ==bottleneck== s2 -- receivers r1..rN
//   incast:   senders h1..hN and one receiver r1, all on s1 (the bottleneck is s1's port to r1)
//   fattree:  the k-ary fat-tree of `pisa-fabric gen fat-tree --k K`: pods p1..pK, each with edge
//             switches p<i>e1.. and aggregation switches p<i>a1.. (K/2 of each, every edge to
//             every aggregation of its pod), (K/2)^2 cores (aggregation j of every pod to cores
//             (j-1)K/2+1 .. jK/2), K/2 hosts per edge numbered h1.. edge by edge, pod by pod.
//             Equal-cost paths are taken per packet at random (`RandomEcmpRouting`): ns-3's
//             global routing has no per-flow hashing, so this is pisa-sim's `spray-random`.
//
// Each flow of the flows file (`SRC DST START_S BYTES`) is one TCP connection doing what
// pisa-traffic does for a sized flow (and what pisa-sim's TCP hosts model): at START_S the client
// connects; once connected it writes an 18-byte header and BYTES bytes; the server, once it has
// all 18+BYTES bytes, writes a 16-byte answer; the flow is complete when the client has the 16
// bytes, and then the client closes. FCT = completion - START_S (the SYN leaves at START_S).
//
// Router egress ports: a 1-packet device queue plus a traffic-control queue disc. The default
// queue disc (`--marker=step`, PisaStepQueueDisc below) counts what waits at the port as pisa-sim
// counts it (the queue disc's packets plus the one in the device queue, not the one on the wire):
// it refuses a packet when `--buffer` packets already wait (tail drop) and marks CE on an ECT
// packet that joins more than `--ecnK` waiting packets (never drops for ECN). `--marker=red`
// uses ns-3's RED as a step marker instead (see README.md for how it differs).
//
// The TCP configuration follows Linux's defaults as far as ns-3 3.37 allows; every difference
// found in the ns-3 sources is listed in README.md ("Differences from pisa-sim / Linux").

#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using namespace ns3;

namespace
{

// The application exchange (pipeline/sim/src/fabric/tcp.rs: HEADER and ANSWER).
constexpr uint64_t kHeaderBytes = 18;
constexpr uint64_t kAnswerBytes = 16;
constexpr uint16_t kServerPort = 5001;

} // namespace

// ---------------------------------------------------------------------------------------------
// PisaStepQueueDisc: a FIFO that counts the packets waiting at the port (its own plus those in
// the device's transmit queue), refuses a packet when `Limit` wait, and marks an ECT packet CE
// when more than `MarkThreshold` wait (0: never). Non-ECT packets are never dropped for marking.
// ---------------------------------------------------------------------------------------------
namespace ns3
{

class PisaStepQueueDisc : public QueueDisc
{
  public:
    static TypeId GetTypeId();
    PisaStepQueueDisc();

    /// The device's own transmit queue, whose packets also wait at this port.
    void SetDeviceQueue(Ptr<Queue<Packet>> q)
    {
        m_devQueue = q;
    }

  private:
    bool DoEnqueue(Ptr<QueueDiscItem> item) override;
    Ptr<QueueDiscItem> DoDequeue() override;
    bool CheckConfig() override;
    void InitializeParams() override;

    uint32_t m_limit{256};
    uint32_t m_threshold{0};
    Ptr<Queue<Packet>> m_devQueue;
};

NS_OBJECT_ENSURE_REGISTERED(PisaStepQueueDisc);

TypeId
PisaStepQueueDisc::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::PisaStepQueueDisc")
            .SetParent<QueueDisc>()
            .SetGroupName("TrafficControl")
            .AddConstructor<PisaStepQueueDisc>()
            .AddAttribute("Limit",
                          "Packets that may wait at the port (queue disc + device queue)",
                          UintegerValue(256),
                          MakeUintegerAccessor(&PisaStepQueueDisc::m_limit),
                          MakeUintegerChecker<uint32_t>(1))
            .AddAttribute("MarkThreshold",
                          "Mark ECT packets CE that join more than this many waiting packets "
                          "(0: no marking)",
                          UintegerValue(0),
                          MakeUintegerAccessor(&PisaStepQueueDisc::m_threshold),
                          MakeUintegerChecker<uint32_t>());
    return tid;
}

PisaStepQueueDisc::PisaStepQueueDisc()
    : QueueDisc(QueueDiscSizePolicy::SINGLE_INTERNAL_QUEUE)
{
}

bool
PisaStepQueueDisc::DoEnqueue(Ptr<QueueDiscItem> item)
{
    uint32_t waiting = GetInternalQueue(0)->GetNPackets();
    if (m_devQueue)
    {
        waiting += m_devQueue->GetNPackets();
    }
    if (waiting >= m_limit)
    {
        DropBeforeEnqueue(item, "Buffer full");
        return false;
    }
    if (m_threshold > 0 && waiting > m_threshold)
    {
        Mark(item, "Step mark"); // does nothing to a Not-ECT packet
    }
    return GetInternalQueue(0)->Enqueue(item);
}

Ptr<QueueDiscItem>
PisaStepQueueDisc::DoDequeue()
{
    return GetInternalQueue(0)->Dequeue();
}

bool
PisaStepQueueDisc::CheckConfig()
{
    if (GetNQueueDiscClasses() > 0 || GetNPacketFilters() > 0)
    {
        NS_LOG_UNCOND("PisaStepQueueDisc takes no classes and no filters");
        return false;
    }
    if (GetNInternalQueues() == 0)
    {
        // Never the binding limit: DoEnqueue refuses first (the device queue counts too).
        AddInternalQueue(CreateObjectWithAttributes<DropTailQueue<QueueDiscItem>>(
            "MaxSize",
            QueueSizeValue(QueueSize(QueueSizeUnit::PACKETS, m_limit))));
    }
    return GetNInternalQueues() == 1;
}

void
PisaStepQueueDisc::InitializeParams()
{
}

} // namespace ns3

// ---------------------------------------------------------------------------------------------
// The scenario.
// ---------------------------------------------------------------------------------------------
namespace
{

struct Host
{
    Ptr<Node> node;
    Ipv4Address addr;
    bool listening{false};
};

struct Flow
{
    std::string src;
    std::string dst;
    double startS{0};
    uint64_t bytes{0};

    Ptr<Socket> client;
    Ptr<Socket> server;
    uint64_t toWrite{0};  // client bytes not yet handed to the socket
    uint64_t clientRx{0}; // answer bytes received by the client
    uint64_t serverRx{0}; // request bytes received by the server
    bool answered{false};
    bool done{false};
    bool failed{false};
    Time doneAt;

    // Retransmitted data segments of the client (like tcpi_total_retrans): a data segment that
    // starts below the highest sequence already sent.
    uint64_t retransmits{0};
    bool sentAny{false};
    SequenceNumber32 highSent;
};

std::map<std::string, Host> g_hosts;
std::vector<Flow> g_flows;
std::map<std::pair<uint32_t, uint16_t>, uint32_t> g_byClient; // (client addr, port) -> flow
uint32_t g_completed = 0;
uint64_t g_packetHops = 0;

[[noreturn]] void
Fail(const std::string& msg)
{
    std::cerr << "pisa-ns3: " << msg << '\n';
    std::exit(2);
}

void
CountRx(Ptr<const Packet>)
{
    ++g_packetHops;
}

void
NoteFinished()
{
    ++g_completed;
    if (g_completed == g_flows.size())
    {
        Simulator::Stop();
    }
}

void
ClientTx(uint32_t i, Ptr<const Packet> p, const TcpHeader& h, Ptr<const TcpSocketBase>)
{
    if (p->GetSize() == 0)
    {
        return;
    }
    Flow& f = g_flows[i];
    SequenceNumber32 end = h.GetSequenceNumber() + SequenceNumber32(p->GetSize());
    if (f.sentAny && h.GetSequenceNumber() < f.highSent)
    {
        ++f.retransmits;
    }
    if (!f.sentAny || end > f.highSent)
    {
        f.highSent = end;
        f.sentAny = true;
    }
}

void
ClientPush(uint32_t i)
{
    Flow& f = g_flows[i];
    while (f.toWrite > 0)
    {
        uint32_t room = f.client->GetTxAvailable();
        if (room == 0)
        {
            return;
        }
        uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(room, f.toWrite));
        if (f.client->Send(Create<Packet>(n)) < 0)
        {
            return;
        }
        f.toWrite -= n;
    }
}

void
ClientSendReady(uint32_t i, Ptr<Socket>, uint32_t)
{
    ClientPush(i);
}

void
ClientConnected(uint32_t i, Ptr<Socket>)
{
    // One stream of header and bytes, as one write: the segments are full-sized from the start.
    g_flows[i].toWrite = kHeaderBytes + g_flows[i].bytes;
    ClientPush(i);
}

void
ClientFailed(uint32_t i, Ptr<Socket>)
{
    Flow& f = g_flows[i];
    if (!f.done && !f.failed)
    {
        f.failed = true;
        NoteFinished();
    }
}

void
ClientRecv(uint32_t i, Ptr<Socket> s)
{
    Flow& f = g_flows[i];
    while (Ptr<Packet> p = s->Recv())
    {
        f.clientRx += p->GetSize();
    }
    if (!f.done && !f.failed && f.clientRx >= kAnswerBytes)
    {
        f.done = true;
        f.doneAt = Simulator::Now();
        s->Close();
        NoteFinished();
    }
}

void
ServerRecv(uint32_t i, Ptr<Socket> s)
{
    Flow& f = g_flows[i];
    while (Ptr<Packet> p = s->Recv())
    {
        f.serverRx += p->GetSize();
    }
    if (!f.answered && f.serverRx >= kHeaderBytes + f.bytes)
    {
        f.answered = true;
        s->Send(Create<Packet>(kAnswerBytes));
    }
}

void
CloseSocket(Ptr<Socket> s)
{
    s->Close();
}

void
ServerPeerClosed(Ptr<Socket> s)
{
    // The client closed (read EOF): close too, outside the socket's own call chain.
    Simulator::ScheduleNow(&CloseSocket, s);
}

bool
AcceptAll(Ptr<Socket>, const Address&)
{
    return true;
}

void
ServerAccepted(Ptr<Socket> s, const Address& from)
{
    InetSocketAddress a = InetSocketAddress::ConvertFrom(from);
    auto it = g_byClient.find({a.GetIpv4().Get(), a.GetPort()});
    if (it == g_byClient.end())
    {
        NS_FATAL_ERROR("connection from an unknown client " << a.GetIpv4() << ":" << a.GetPort());
    }
    uint32_t i = it->second;
    g_flows[i].server = s;
    s->SetRecvCallback(MakeBoundCallback(&ServerRecv, i));
    s->SetCloseCallbacks(MakeCallback(&ServerPeerClosed), MakeCallback(&ServerPeerClosed));
}

void
StartFlow(uint32_t i)
{
    Flow& f = g_flows[i];
    Host& src = g_hosts[f.src];
    Host& dst = g_hosts[f.dst];
    Ptr<Socket> s = Socket::CreateSocket(src.node, TcpSocketFactory::GetTypeId());
    f.client = s;
    if (s->Bind() != 0)
    {
        NS_FATAL_ERROR("flow " << i << ": bind failed");
    }
    Address local;
    s->GetSockName(local);
    uint16_t port = InetSocketAddress::ConvertFrom(local).GetPort();
    g_byClient[{src.addr.Get(), port}] = i;
    s->TraceConnectWithoutContext("Tx", MakeBoundCallback(&ClientTx, i));
    s->SetConnectCallback(MakeBoundCallback(&ClientConnected, i),
                          MakeBoundCallback(&ClientFailed, i));
    s->SetSendCallback(MakeBoundCallback(&ClientSendReady, i));
    s->SetRecvCallback(MakeBoundCallback(&ClientRecv, i));
    s->Connect(InetSocketAddress(dst.addr, kServerPort));
}

void
Listen(Host& h)
{
    if (h.listening)
    {
        return;
    }
    h.listening = true;
    Ptr<Socket> l = Socket::CreateSocket(h.node, TcpSocketFactory::GetTypeId());
    l->Bind(InetSocketAddress(Ipv4Address::GetAny(), kServerPort));
    l->Listen();
    l->SetAcceptCallback(MakeCallback(&AcceptAll), MakeCallback(&ServerAccepted));
}

std::vector<Flow>
ReadFlows(const std::string& path)
{
    std::ifstream in(path);
    if (!in)
    {
        Fail("cannot read flows file '" + path + "'");
    }
    std::vector<Flow> flows;
    std::string line;
    unsigned lineNo = 0;
    while (std::getline(in, line))
    {
        ++lineNo;
        std::string::size_type hash = line.find('#');
        if (hash != std::string::npos)
        {
            line.erase(hash);
        }
        std::istringstream ls(line);
        Flow f;
        if (!(ls >> f.src))
        {
            continue; // blank or comment
        }
        std::string rest;
        if (!(ls >> f.dst >> f.startS >> f.bytes) || (ls >> rest) || f.startS < 0)
        {
            Fail(path + ":" + std::to_string(lineNo) + ": expected 'SRC DST START_S BYTES'");
        }
        flows.push_back(f);
    }
    return flows;
}

struct LinkSpec
{
    DataRate rate;
    Time delay;
    uint32_t l2Bytes;
};

// One point-to-point link: a 1-packet device queue at both ends. PPP puts 2 bytes before the
// IPv4 packet; an inter-frame gap of (l2Bytes - 2) byte-times makes each frame occupy the link
// as long as an IPv4 packet with an l2Bytes header (14: pisa-sim's Ethernet accounting).
NetDeviceContainer
LinkUp(Ptr<Node> a, Ptr<Node> b, const LinkSpec& l)
{
    PointToPointHelper p2p;
    p2p.SetDeviceAttribute("DataRate", DataRateValue(l.rate));
    p2p.SetDeviceAttribute("Mtu", UintegerValue(1500));
    p2p.SetDeviceAttribute("InterframeGap", TimeValue(l.rate.CalculateBytesTxTime(l.l2Bytes - 2)));
    p2p.SetChannelAttribute("Delay", TimeValue(l.delay));
    p2p.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", QueueSizeValue(QueueSize("1p")));
    return p2p.Install(a, b);
}

} // namespace

int
main(int argc, char* argv[])
{
    // Picoseconds: a 10 Gb/s link's byte takes 0.8 ns; nanoseconds would round every frame.
    Time::SetResolution(Time::PS);

    std::string topo = "dumbbell";
    uint32_t n = 1;
    uint32_t k = 4;
    std::string hostRate = "10Gbps";
    std::string bottleneckRate = "10Gbps";
    double delayUs = 0;
    uint32_t buffer = 256;
    std::string cc = "cubic";
    int ecn = -1;
    uint32_t ecnK = 0;
    double rtoMinMs = 200;
    std::string flowsPath;
    std::string outPath;
    uint32_t seed = 1;
    double stopS = 60;
    std::string marker = "step";
    uint32_t l2Bytes = 14;
    bool timestamps = true;
    uint32_t hostQueue = 100000;

    CommandLine cmd(__FILE__);
    cmd.Usage("pisa-sim's TCP scenarios in ns-3: a dumbbell, an incast or a fat-tree, flows "
              "from a file, "
              "FCTs to a CSV.");
    cmd.AddValue("topo", "dumbbell | incast | fattree", topo);
    cmd.AddValue("n", "number of senders (dumbbell, incast)", n);
    cmd.AddValue("k", "the fat-tree's k (even, at least 2)", k);
    cmd.AddValue("hostRate", "rate of every host link (all links for incast)", hostRate);
    cmd.AddValue("bottleneckRate",
                 "rate of the dumbbell's s1-s2 link, or of the fat-tree's switch-to-switch links",
                 bottleneckRate);
    cmd.AddValue("delayUs", "one-way propagation delay of every link, microseconds", delayUs);
    cmd.AddValue("buffer", "packets that may wait at a router egress port", buffer);
    cmd.AddValue("cc", "reno | cubic | dctcp", cc);
    cmd.AddValue("ecn", "1: negotiate ECN (default 1 for dctcp, else 0)", ecn);
    cmd.AddValue("ecnK", "mark CE when more than K packets wait (0: no marking)", ecnK);
    cmd.AddValue("rtoMinMs", "minimum RTO, ms", rtoMinMs);
    cmd.AddValue("flows", "flows file: 'SRC DST START_S BYTES' per line, # comments", flowsPath);
    cmd.AddValue("out", "CSV output file (default: stdout)", outPath);
    cmd.AddValue("seed", "ns-3 run number for the random streams", seed);
    cmd.AddValue("stopS", "hard end of simulated time, seconds", stopS);
    cmd.AddValue("marker", "router queue: step (pisa-sim's semantics) | red (ns-3 RED)", marker);
    cmd.AddValue("l2Bytes", "link-layer bytes per frame for serialisation (PPP's 2 + gap)", l2Bytes);
    cmd.AddValue("timestamps", "TCP timestamps (0: MSS 1460 and exact RTT samples)", timestamps);
    cmd.AddValue("hostQueue", "packets of a host's own egress FIFO", hostQueue);
    cmd.Parse(argc, argv);

    if (topo != "dumbbell" && topo != "incast" && topo != "fattree")
    {
        Fail("--topo must be dumbbell, incast or fattree");
    }
    if (topo == "fattree" && (k < 2 || k % 2 != 0))
    {
        Fail("--k must be even and at least 2");
    }
    if (topo == "fattree")
    {
        // Per packet among equal-cost next hops at every router.
        Config::SetDefault("ns3::Ipv4GlobalRouting::RandomEcmpRouting", BooleanValue(true));
    }
    if (n == 0)
    {
        Fail("--n must be at least 1");
    }
    if (cc != "reno" && cc != "cubic" && cc != "dctcp")
    {
        Fail("--cc must be reno, cubic or dctcp");
    }
    if (ecn < 0)
    {
        ecn = cc == "dctcp" ? 1 : 0;
    }
    if (cc == "dctcp" && ecnK == 0)
    {
        Fail("--cc=dctcp needs --ecnK");
    }
    if (cc == "dctcp" && ecn == 0)
    {
        // TcpDctcp::Init sets m_useEcn = On whatever UseEcn says.
        std::cerr << "warning: ns-3's DCTCP always negotiates ECN; --ecn=0 has no effect\n";
    }
    if (marker != "step" && marker != "red")
    {
        Fail("--marker must be step or red");
    }
    if (marker == "red" && buffer < 2)
    {
        Fail("--marker=red needs --buffer >= 2 (one packet waits in the device queue)");
    }
    if (buffer == 0)
    {
        Fail("--buffer must be at least 1");
    }
    if (l2Bytes < 2)
    {
        Fail("--l2Bytes must be at least PPP's 2");
    }
    if (flowsPath.empty())
    {
        Fail("--flows is required");
    }

    RngSeedManager::SetSeed(1);
    RngSeedManager::SetRun(seed);

    // --- TCP: Linux's defaults as far as ns-3 3.37 goes ---------------------------------------
    // Not matchable with ns-3 3.37's attributes (details and sources in README.md): no RACK, no
    // tail-loss probe, no D-SACK undo or F-RTO, a fixed dupthresh of 3; with timestamps, RTT
    // samples in whole ms from TSecr; CUBIC gets SRTT, has other HyStart thresholds and no
    // Reno-friendly region; no quick-ACK mode (DelAckCount counts every in-order segment); the
    // DCTCP receiver does not ACK at once on a CE change and its ssthresh has no 2-segment
    // floor; classic ECN marks retransmissions and pure ACKs ECT; no TSQ, TSO or cwnd-limited
    // check; RTO back-off capped at 60 s; no MSS option.
    TypeId ccType = cc == "reno"    ? TcpLinuxReno::GetTypeId()
                    : cc == "cubic" ? TcpCubic::GetTypeId()
                                    : TcpDctcp::GetTypeId();
    Config::SetDefault("ns3::TcpL4Protocol::SocketType", TypeIdValue(ccType));
    Config::SetDefault("ns3::TcpL4Protocol::RecoveryType",
                       TypeIdValue(TcpPrrRecovery::GetTypeId()));
    // MTU 1500: 20 (IPv4) + 20 (TCP) + 12 (timestamps option, padded) + 1448. ns-3 sends no MSS
    // option; both ends simply use this size.
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(timestamps ? 1448 : 1460));
    Config::SetDefault("ns3::TcpSocket::InitialCwnd", UintegerValue(10));
    Config::SetDefault("ns3::TcpSocket::InitialSlowStartThreshold",
                       UintegerValue(std::numeric_limits<uint32_t>::max()));
    Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(2));
    Config::SetDefault("ns3::TcpSocket::DelAckTimeout", TimeValue(MilliSeconds(40)));
    Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(6291456));
    Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(6291456));
    Config::SetDefault("ns3::TcpSocket::TcpNoDelay", BooleanValue(true));
    // Linux: TCP_TIMEOUT_INIT 1 s for the SYN (ns-3's default is 3 s), tcp_syn_retries 6,
    // tcp_retries2 15 (ns-3's DataRetries default of 6 would abort a connection much sooner).
    Config::SetDefault("ns3::TcpSocket::ConnTimeout", TimeValue(Seconds(1)));
    Config::SetDefault("ns3::TcpSocket::ConnCount", UintegerValue(6));
    Config::SetDefault("ns3::TcpSocket::DataRetries", UintegerValue(15));
    Config::SetDefault("ns3::TcpSocketBase::Sack", BooleanValue(true));
    Config::SetDefault("ns3::TcpSocketBase::Timestamp", BooleanValue(timestamps));
    Config::SetDefault("ns3::TcpSocketBase::WindowScaling", BooleanValue(true));
    Config::SetDefault("ns3::TcpSocketBase::MinRto", TimeValue(Seconds(rtoMinMs / 1000.0)));
    Config::SetDefault("ns3::TcpSocketBase::UseEcn",
                       EnumValue(ecn ? TcpSocketState::On : TcpSocketState::Off));
    Config::SetDefault("ns3::TcpDctcp::DctcpShiftG", DoubleValue(1.0 / 16));
    Config::SetDefault("ns3::TcpDctcp::DctcpAlphaOnInit", DoubleValue(1.0));

    // --- Topology -----------------------------------------------------------------------------
    DataRate hostDr(hostRate);
    DataRate bottleneckDr(bottleneckRate);
    Time delay = NanoSeconds(static_cast<int64_t>(delayUs * 1000.0 + 0.5));
    LinkSpec hostLink{hostDr, delay, l2Bytes};
    LinkSpec coreLink{bottleneckDr, delay, l2Bytes};

    NodeContainer all;
    std::map<std::string, Ptr<Node>> routers;
    auto makeNode = [&all]() {
        Ptr<Node> x = CreateObject<Node>();
        all.Add(x);
        return x;
    };
    std::vector<std::string> hostOrder;
    // Each host's router, by host name.
    std::map<std::string, std::string> hostRouter;
    // Router-to-router links, (a, b) by name.
    std::vector<std::pair<std::string, std::string>> fabricLinks;
    auto addHost = [&](const std::string& name, const std::string& router) {
        g_hosts[name].node = makeNode();
        hostOrder.push_back(name);
        hostRouter[name] = router;
    };
    if (topo == "fattree")
    {
        uint32_t half = k / 2;
        for (uint32_t c = 1; c <= half * half; ++c)
        {
            routers["core" + std::to_string(c)] = makeNode();
        }
        uint32_t host = 1;
        for (uint32_t p = 1; p <= k; ++p)
        {
            std::string pod = "p" + std::to_string(p);
            for (uint32_t a = 1; a <= half; ++a)
            {
                std::string agg = pod + "a" + std::to_string(a);
                routers[agg] = makeNode();
                for (uint32_t c = 1; c <= half; ++c)
                {
                    fabricLinks.emplace_back(agg, "core" + std::to_string((a - 1) * half + c));
                }
            }
            for (uint32_t e = 1; e <= half; ++e)
            {
                std::string edge = pod + "e" + std::to_string(e);
                routers[edge] = makeNode();
                for (uint32_t a = 1; a <= half; ++a)
                {
                    fabricLinks.emplace_back(edge, pod + "a" + std::to_string(a));
                }
                for (uint32_t i = 0; i < half; ++i)
                {
                    addHost("h" + std::to_string(host++), edge);
                }
            }
        }
    }
    else
    {
        routers["s1"] = makeNode();
        if (topo == "dumbbell")
        {
            routers["s2"] = makeNode();
            fabricLinks.emplace_back("s1", "s2");
        }
        for (uint32_t i = 1; i <= n; ++i)
        {
            addHost("h" + std::to_string(i), "s1");
        }
        uint32_t receivers = topo == "dumbbell" ? n : 1;
        for (uint32_t i = 1; i <= receivers; ++i)
        {
            addHost("r" + std::to_string(i), topo == "dumbbell" ? "s2" : "s1");
        }
    }

    InternetStackHelper stack;
    stack.Install(all);

    // Links: (host or router A, router B, spec); device 0 is A's, device 1 is B's.
    struct Built
    {
        NetDeviceContainer devs;
        bool aIsHost;
        std::string hostName;
    };
    std::vector<Built> links;
    for (const std::string& name : hostOrder)
    {
        links.push_back(
            {LinkUp(g_hosts[name].node, routers[hostRouter[name]], hostLink), true, name});
    }
    for (const auto& [a, b] : fabricLinks)
    {
        links.push_back({LinkUp(routers[a], routers[b], coreLink), false, ""});
    }

    // Queue discs, before any address is assigned (Ipv4AddressHelper would install a default).
    TrafficControlHelper hostTc;
    hostTc.SetRootQueueDisc("ns3::FifoQueueDisc",
                            "MaxSize",
                            QueueSizeValue(QueueSize(QueueSizeUnit::PACKETS, hostQueue)));
    QueueDiscContainer hostQdiscs;
    QueueDiscContainer routerQdiscs;
    auto installRouterQdisc = [&](Ptr<NetDevice> dev, const DataRate& rate) {
        TrafficControlHelper tc;
        if (marker == "step")
        {
            tc.SetRootQueueDisc("ns3::PisaStepQueueDisc",
                                "Limit",
                                UintegerValue(buffer),
                                "MarkThreshold",
                                UintegerValue(ecnK));
        }
        else if (ecnK > 0)
        {
            // RED as a step marker: weight 1 (the instantaneous queue), both thresholds at K,
            // mark instead of drop above them. RED compares its own queue length before the
            // arrival with K; the device queue holds the one more packet that pisa-sim counts,
            // so "qdisc >= K" is "more than K wait" and the limit is buffer - 1.
            tc.SetRootQueueDisc("ns3::RedQueueDisc",
                                "MaxSize",
                                QueueSizeValue(QueueSize(QueueSizeUnit::PACKETS, buffer - 1)),
                                "MinTh",
                                DoubleValue(ecnK),
                                "MaxTh",
                                DoubleValue(ecnK),
                                "QW",
                                DoubleValue(1.0),
                                "UseEcn",
                                BooleanValue(true),
                                "UseHardDrop",
                                BooleanValue(false),
                                "Gentle",
                                BooleanValue(false),
                                "LinkBandwidth",
                                DataRateValue(rate),
                                "LinkDelay",
                                TimeValue(delay));
        }
        else
        {
            tc.SetRootQueueDisc("ns3::FifoQueueDisc",
                                "MaxSize",
                                QueueSizeValue(QueueSize(QueueSizeUnit::PACKETS, buffer - 1)));
        }
        QueueDiscContainer q = tc.Install(dev);
        if (Ptr<PisaStepQueueDisc> step = DynamicCast<PisaStepQueueDisc>(q.Get(0)))
        {
            step->SetDeviceQueue(DynamicCast<PointToPointNetDevice>(dev)->GetQueue());
        }
        routerQdiscs.Add(q);
    };
    for (const Built& b : links)
    {
        if (b.aIsHost)
        {
            hostQdiscs.Add(hostTc.Install(b.devs.Get(0)));
            installRouterQdisc(b.devs.Get(1), hostDr);
        }
        else
        {
            installRouterQdisc(b.devs.Get(0), bottleneckDr);
            installRouterQdisc(b.devs.Get(1), bottleneckDr);
        }
    }

    // A /30 per link: 10.0.0.0, 10.0.0.4, ...
    Ipv4AddressHelper ip;
    ip.SetBase("10.0.0.0", "255.255.255.252");
    for (const Built& b : links)
    {
        Ipv4InterfaceContainer ifs = ip.Assign(b.devs);
        if (b.aIsHost)
        {
            g_hosts[b.hostName].addr = ifs.GetAddress(0);
        }
        ip.NewNetwork();
    }
    Ipv4GlobalRoutingHelper::PopulateRoutingTables();

    // --- Flows --------------------------------------------------------------------------------
    g_flows = ReadFlows(flowsPath);
    for (uint32_t i = 0; i < g_flows.size(); ++i)
    {
        Flow& f = g_flows[i];
        if (!g_hosts.count(f.src) || !g_hosts.count(f.dst) || f.src == f.dst)
        {
            Fail("flow " + std::to_string(i) + " (" + f.src + " -> " + f.dst +
                 "): SRC and DST must be two different hosts of the topology");
        }
        Listen(g_hosts[f.dst]);
        Simulator::Schedule(Seconds(f.startS), &StartFlow, i);
    }

    // Packet-hops as pisa-sim counts them: packets that enter a router (not a host).
    for (const auto& [name, node] : routers)
    {
        Config::ConnectWithoutContext("/NodeList/" + std::to_string(node->GetId()) +
                                          "/DeviceList/*/$ns3::PointToPointNetDevice/PhyRxEnd",
                                      MakeCallback(&CountRx));
    }

    if (g_flows.empty())
    {
        std::cerr << "warning: no flows\n";
    }
    Simulator::Stop(Seconds(stopS));
    auto wall0 = std::chrono::steady_clock::now();
    Simulator::Run();
    auto wall1 = std::chrono::steady_clock::now();
    double simS = Simulator::Now().GetSeconds();
    double wallS = std::chrono::duration<double>(wall1 - wall0).count();

    // --- Output -------------------------------------------------------------------------------
    std::ofstream file;
    if (!outPath.empty())
    {
        file.open(outPath);
        if (!file)
        {
            Fail("cannot write '" + outPath + "'");
        }
    }
    std::ostream& out = outPath.empty() ? std::cout : file;
    out << "flow,src,dst,bytes,start_s,fct_ns,retransmits\n";
    uint32_t finished = 0;
    for (uint32_t i = 0; i < g_flows.size(); ++i)
    {
        const Flow& f = g_flows[i];
        out << i << ',' << f.src << ',' << f.dst << ',' << f.bytes << ',' << f.startS << ',';
        if (f.done)
        {
            ++finished;
            out << (f.doneAt - Seconds(f.startS)).GetNanoSeconds();
        }
        out << ',' << f.retransmits << '\n';
    }
    out.flush();

    auto sumStats = [](const QueueDiscContainer& c, uint64_t& drops, uint64_t& marks) {
        drops = marks = 0;
        for (uint32_t i = 0; i < c.GetN(); ++i)
        {
            const QueueDisc::Stats& s = c.Get(i)->GetStats();
            drops += s.nTotalDroppedPackets;
            marks += s.nTotalMarkedPackets;
        }
    };
    uint64_t routerDrops;
    uint64_t routerMarks;
    uint64_t hostDrops;
    uint64_t hostMarks;
    sumStats(routerQdiscs, routerDrops, routerMarks);
    sumStats(hostQdiscs, hostDrops, hostMarks);

    std::cerr << "flows_completed=" << finished << "/" << g_flows.size()
              << " router_drops=" << routerDrops << " router_marks=" << routerMarks
              << " host_drops=" << hostDrops << '\n';
    std::cerr << "sim_s=" << simS << " wall_s=" << wallS << " packet_hops=" << g_packetHops
              << " packet_hops_per_wall_s=" << (wallS > 0 ? g_packetHops / wallS : 0.0) << '\n';

    Simulator::Destroy();
    return 0;
}
