#!/usr/bin/env python3
"""rdma-core's run_tests.py for the test VM (cshim/pyverbsvm.sh).

rdma-core's tests find a device's IP address through
/sys/class/infiniband/<dev>/device/net/, which a Soft-RoCE device on a veth
has not (a veth has no parent device): they then skip every RDMA-CM test with
"Device rxe0 doesn't have net interface". This runner names the netdev of
each device from the harness's environment (USB4VERBS_DEVn/USB4VERBS_NETDEVn)
and otherwise runs the tests as run_tests.py does.

    pyverbs_run.py TESTSDIR [run_tests.py arguments...]

With PYVERBS_RESULT_PREFIX=P set, every test also gets a go-test-style line
as it ends, "--- PASS|FAIL|SKIP: P/<test method> (<seconds>s)", with the
skip reason or the error's last line indented below it.
"""
import os
import sys
import time
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

prefix = os.environ.get('PYVERBS_RESULT_PREFIX')
if not prefix:
    unittest.main(module=tests)
    sys.exit(0)


class GoTestResult(unittest.TextTestResult):
    """Prints a go-test-style line per test as it ends."""

    def startTest(self, test):
        self._t0 = time.monotonic()
        super().startTest(test)

    def _line(self, verdict, test, note=''):
        name = test.id().rsplit('.', 1)[-1] if isinstance(test, unittest.TestCase) else str(test)
        secs = time.monotonic() - getattr(self, '_t0', time.monotonic())
        print('--- %s: %s/%s (%.2fs)' % (verdict, prefix, name, secs), flush=True)
        if note:
            print('    ' + note.strip().splitlines()[-1], flush=True)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._line('PASS', test)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._line('SKIP', test, reason)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._line('FAIL', test, self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._line('FAIL', test, self._exc_info_to_string(err, test))

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._line('FAIL', test, 'unexpected success')

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._line('PASS', test, 'expected failure')


unittest.main(module=tests, testRunner=unittest.TextTestRunner(resultclass=GoTestResult, verbosity=2))
