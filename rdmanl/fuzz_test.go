package rdmanl

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// seedFrames adds framed replies the real kernel sends.
func seedFrames(f *testing.F) {
	f.Add(concat(nlmsg(0x1401, unix.NLM_F_MULTI, 2, devPayload(testDevs[0])), doneMsg(2, 0)))
	f.Add(concat(nlmsg(0x1405, unix.NLM_F_MULTI, 2, portPayload(testDevs[0], 1)), doneMsg(2, unix.NLM_F_DUMP_INTR)))
	f.Add(concat(nlmsg(0x140f, 0, 2, chardevPayload(testDevs[0])), errMsg(message{Header: unix.NlMsghdr{Len: 16, Type: 0x140f, Seq: 2}}, 0, "")))
	f.Add(errMsg(message{Header: unix.NlMsghdr{Len: 40, Type: 0x1403, Seq: 2}}, unix.ENODEV, "netdev not found"))
	f.Add([]byte{})
}

// FuzzParseReply runs every decoder over arbitrary datagrams: none may panic,
// and every rejection must be EBADMSG.
func FuzzParseReply(f *testing.F) {
	seedFrames(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, err := parseMessages(b)
		if err != nil && !errors.Is(err, unix.EBADMSG) {
			t.Fatalf("parseMessages: %v", err)
		}
		for _, m := range msgs {
			if int(m.Header.Len) != unix.NLMSG_HDRLEN+len(m.Data) {
				t.Fatalf("header length %d, payload %d", m.Header.Len, len(m.Data))
			}
			for _, dec := range []func([]byte) error{
				func(p []byte) error { _, err := decodeDevice(p); return err },
				func(p []byte) error { _, err := decodePort(p); return err },
				func(p []byte) error { _, err := decodeChardev(p); return err },
				func(p []byte) error { _, err := decodeNetnsMode(p); return err },
			} {
				if err := dec(m.Data); err != nil && !errors.Is(err, unix.EBADMSG) {
					t.Fatalf("decoder: %v", err)
				}
			}
			if _, _, _, err := parseErrorPayload(m); err != nil && !errors.Is(err, unix.EBADMSG) {
				t.Fatalf("parseErrorPayload: %v", err)
			}
		}
	})
}

// FuzzDecodeChardev checks that an accepted chardev reply names a file
// directly under /dev/infiniband.
func FuzzDecodeChardev(f *testing.F) {
	f.Add(chardevPayload(testDevs[0]))
	f.Add(chardevPayload(fakeDev{uverbs: "..", abi: 1}))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeChardev(b)
		if err != nil {
			if !errors.Is(err, unix.EBADMSG) {
				t.Fatal(err)
			}
			return
		}
		if c.Path != "/dev/infiniband/"+c.Name {
			t.Fatalf("path %q escapes /dev/infiniband (name %q)", c.Path, c.Name)
		}
	})
}

// FuzzHandle feeds arbitrary datagrams to every Handle verb through the fake
// conn: each must return (not panic, not loop) with results or an error.
func FuzzHandle(f *testing.F) {
	seedFrames(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		reply := func(req message) [][]byte {
			// Let the fuzzer's bytes answer the current request: patch
			// the sequence number of every well-framed message.
			out := append([]byte(nil), b...)
			msgs, _ := parseMessages(out)
			off := 0
			for _, m := range msgs {
				copy(out[off+8:off+12], marshalMessage(0, 0, req.Header.Seq, nil)[8:12])
				off += nlmsgAlign(int(m.Header.Len))
			}
			return [][]byte{out}
		}
		h, _ := newFake(t, reply)
		_, _ = h.Devices()
		_, _ = h.Ports(3)
		_, _ = h.UverbsChardev(3)
		_, _ = h.NetnsMode()
		_ = h.AddRxeLink("rxe9", "vethC")
		_ = h.DeleteLink("rxe0")
	})
}
