#!/usr/bin/env python3
"""Loads BMv2 programs into a running `pisa-switch --no-p4` over P4Runtime, as a controller would.

For each PROGRAM.json with its P4Info beside it (PROGRAM.proto.txt, PROGRAM.p4info.txt or
PROGRAM.p4info.txtpb: protobuf text, as p4c writes it), sends SetForwardingPipelineConfig
(VERIFY_AND_COMMIT) with the P4Info and the JSON as the device config, and prints one line per
program: `loaded` or the gRPC error. Needs the `shell` venv of scripts/py-clients.sh (grpcio and
the p4runtime protobufs). The switch must be started with --no-p4 (or a JSON program).

    python scripts/bmv2-load-check.py --grpc-addr 127.0.0.1:9559 DIR_OR_FILE.json...
"""

import argparse
import os
import sys

import grpc
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc


def p4info_of(json_path):
    stem = json_path[: -len(".json")]
    for suffix in (".proto.txt", ".p4info.txt", ".p4info.txtpb"):
        if os.path.exists(stem + suffix):
            return stem + suffix
    return None


def programs(paths):
    for p in paths:
        if os.path.isdir(p):
            for name in sorted(os.listdir(p)):
                if name.endswith(".json"):
                    yield os.path.join(p, name)
        else:
            yield p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--grpc-addr", default="127.0.0.1:9559")
    ap.add_argument("--device-id", type=int, default=0)
    ap.add_argument("paths", nargs="+")
    args = ap.parse_args()
    channel = grpc.insecure_channel(args.grpc_addr)
    stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
    # Become primary (election id 1) on a stream kept open for the whole run.
    requests = iter_requests(args.device_id)
    stream = stub.StreamChannel(requests)
    next(stream)
    loaded = 0
    total = 0
    for json_path in programs(args.paths):
        p4info_path = p4info_of(json_path)
        if p4info_path is None:
            continue
        total += 1
        p4info = p4info_pb2.P4Info()
        text_format.Parse(open(p4info_path).read(), p4info)
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest(
            device_id=args.device_id,
            election_id=p4runtime_pb2.Uint128(high=0, low=1),
            action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
            config=p4runtime_pb2.ForwardingPipelineConfig(
                p4info=p4info, p4_device_config=open(json_path, "rb").read()
            ),
        )
        name = os.path.basename(json_path)
        try:
            stub.SetForwardingPipelineConfig(req)
            got = stub.GetForwardingPipelineConfig(
                p4runtime_pb2.GetForwardingPipelineConfigRequest(device_id=args.device_id)
            )
            same = got.config.p4info == p4info
            print(f"{name}: loaded{'' if same else ' (Get returned another P4Info)'}")
            loaded += 1
        except grpc.RpcError as e:
            print(f"{name}: {e.code().name}: {e.details()}")
    print(f"{loaded} of {total} loaded")
    return 0 if loaded == total else 1


def iter_requests(device_id):
    yield p4runtime_pb2.StreamMessageRequest(
        arbitration=p4runtime_pb2.MasterArbitrationUpdate(
            device_id=device_id, election_id=p4runtime_pb2.Uint128(high=0, low=1)
        )
    )
    # Keep the stream open until the process exits.
    import threading

    threading.Event().wait()


if __name__ == "__main__":
    sys.exit(main())
