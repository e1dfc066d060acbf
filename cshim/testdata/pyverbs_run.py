#!/usr/bin/env python3
"""rdma-core's run_tests.py for the test VM (cshim/pyverbsvm.sh).

rdma-core's tests find a device's IP address through
/sys/class/infiniband/<dev>/device/net/, which a Soft-RoCE device on a veth
has not (a veth has no parent device): they then skip every RDMA-CM test with
"Device rxe0 doesn't have net interface". This runner names the netdev of
each device from the harness's environment (USB4VERBS_DEVn/USB4VERBS_NETDEVn)
and otherwise runs the tests as run_tests.py does.

    pyverbs_run.py TESTSDIR [run_tests.py arguments...]
"""
import os
import sys
import unittest
from importlib.machinery import SourceFileLoader

testsdir = sys.argv.pop(1)
sys.path.insert(0, testsdir)
from args_parser import parser  # noqa: E402 (rdma-core's, from testsdir)

tests = SourceFileLoader('tests', os.path.join(testsdir, '__init__.py')).load_module()
base = sys.modules['tests.base']

netdevs = {}
for i in range(8):
    dev, net = os.environ.get('USB4VERBS_DEV%d' % i), os.environ.get('USB4VERBS_NETDEV%d' % i)
    if dev and net:
        netdevs[dev] = net


def _get_ip_mac(self, dev, port, idx):
    net = netdevs.get(dev)
    try:
        ip_addr, mac_addr = self.get_ip_mac_address(net) if net else (None, None)
    except (KeyError, IndexError):
        ip_addr, mac_addr = None, None
    self.args.append([dev, port, idx, ip_addr, mac_addr])


base.RDMATestCase._get_ip_mac = _get_ip_mac
parser.parse_args()
unittest.main(module=tests)
