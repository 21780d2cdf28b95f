#!/usr/bin/env python3
"""Decode and compare ps-lite (byteps branch) ZMQ traffic in a capture.

Takes a capture of a loopback job (tshark -i lo -f "tcp portrange A-B" -w
FILE) and the job's listening ports, reassembles every TCP stream, parses
ZMTP 3 (greeting, READY with socket type and identity, frames) and decodes
each meta frame as docs/wire.md section 4 describes it.

  wirecmp.py dump    CAPTURE PORTS
  wirecmp.py compare CAPTURE PORTS IMPLS [CAPTURE PORTS IMPLS ...]
  wirecmp.py echo    CAPTURE PORTS IMPLS
  wirecmp.py acks    CAPTURE PORTS IMPLS

PORTS names the listening port of each node: "20001=sched,20002=s0,20003=w0".
IMPLS says which implementation each node runs: "sched=c,s0=p,w0=c" (c: C++
ps-lite, p: pslite).

dump     prints every message in time order with its decoded meta and nodes.
compare  groups messages by kind (registration, node list, barrier request
         and release, heartbeat each way, ACK, push/pull request/response)
         and prints, per kind, the fields whose values differ between the
         C++ and the pslite senders. Fields docs/wire.md calls unspecified (C++
         leaves them uninitialised), and values that change from message to
         message (timestamps, addresses, signatures), are masked.
echo     checks that every KV response echoes its request's timestamp,
         customer_id, head, key, addr, val_len and option (docs/wire.md 10.3),
         and prints the order in which the scheduler sent its node lists.
acks     (PS_RESEND jobs) checks that every message was ACKed by its receiver
         with the msg_sig of docs/wire.md section 9.

Needs tshark (to read the capture). Python 3 only otherwise.
"""
import struct
import subprocess
import sys
from collections import defaultdict

CMD = {0: "EMPTY", 1: "TERMINATE", 2: "ADD_NODE", 3: "BARRIER", 4: "ACK", 5: "HEARTBEAT",
       6: "BOOTSTRAP", 7: "ADDR_REQUEST", 8: "ADDR_RESOLVED", 9: "INSTANCE_BARRIER"}
IMPL_NAME = {"c": "C++", "p": "pslite"}


# ------------------------------------------------------------ capture, ZMTP --
def streams(cap):
    """{(stream, srcport, dstport): (bytes, [(offset, time)])}, in order; a
    stream is cut where the capture lost a segment."""
    out = subprocess.run(["tshark", "-r", cap, "-Y", "tcp.len>0", "-T", "fields",
                          "-e", "tcp.stream", "-e", "tcp.srcport", "-e", "tcp.dstport",
                          "-e", "tcp.seq_raw", "-e", "frame.time_relative", "-e", "tcp.payload"],
                         capture_output=True, text=True, check=True).stdout
    segs = defaultdict(list)
    for line in out.splitlines():
        f = line.split("\t")
        if len(f) < 6 or not f[5]:
            continue
        segs[(int(f[0]), int(f[1]), int(f[2]))].append(
            (int(f[3]), float(f[4]), bytes.fromhex(f[5].replace(":", ""))))
    res = {}
    for key, lst in segs.items():
        lst.sort()
        data, times, nxt = bytearray(), [], None
        for seq, t, p in lst:
            if nxt is not None and seq > nxt:
                break  # lost by the capture: what follows cannot be framed
            if nxt is not None and seq < nxt:
                p = p[nxt - seq:]
                if not p:
                    continue
            times.append((len(data), t))
            data += p
            nxt = seq + len(p) if nxt is None or seq >= nxt else nxt + len(p)
        res[key] = (bytes(data), times)
    return res


def time_at(times, off):
    t = times[0][1] if times else 0.0
    for o, tt in times:
        if o > off:
            break
        t = tt
    return t


def parse_zmtp(data):
    """(READY properties or None, [(offset, [frame bytes])])"""
    if len(data) < 64 or data[0] != 0xFF or data[9] != 0x7F:
        return None, []
    pos, ready, msgs, cur, mstart = 64, None, [], [], 64
    while pos < len(data):
        flags = data[pos]
        if flags & 2:
            if pos + 9 > len(data):
                break
            size = struct.unpack(">Q", data[pos + 1:pos + 9])[0]
            pos += 9
        else:
            if pos + 2 > len(data):
                break
            size = data[pos + 1]
            pos += 2
        body = data[pos:pos + size]
        if len(body) < size:
            break
        pos += size
        if flags & 4:  # a command
            if body and body[1:1 + body[0]] == b"READY":
                props, q = {}, 1 + body[0]
                while q < len(body):
                    pl = body[q]
                    pn = body[q + 1:q + 1 + pl].decode()
                    q += 1 + pl
                    vl = struct.unpack(">I", body[q:q + 4])[0]
                    props[pn] = body[q + 4:q + 4 + vl]
                    q += 4 + vl
                ready = props
            continue
        if not cur:
            mstart = pos - size
        cur.append(body)
        if not flags & 1:
            msgs.append((mstart, cur))
            cur = []
    return ready, msgs


# -------------------------------------------------------------------- meta --
def i32(b, o):
    return struct.unpack_from("<i", b, o)[0]


def u64(b, o):
    return struct.unpack_from("<Q", b, o)[0]


def decode_node(b, o):
    return dict(role=i32(b, o), id=i32(b, o + 4),
                host=b[o + 8:o + 72].split(b"\0")[0].decode(errors="replace"),
                num_ports=i32(b, o + 72), ports0=i32(b, o + 76), port=i32(b, o + 204),
                dev_types0=i32(b, o + 208), dev_ids0=i32(b, o + 336), is_recovery=b[o + 464],
                customer_id=i32(b, o + 468), endpoint_name_len=u64(b, o + 536),
                aux_id=i32(b, o + 544))


def decode_meta(b):
    if len(b) < 112:
        return None
    m = dict(head=i32(b, 0), body_size=i32(b, 4), cmd=i32(b, 8), node_size=i32(b, 12),
             barrier_group=i32(b, 16), msg_sig=u64(b, 24), request=b[32], app_id=i32(b, 36),
             timestamp=i32(b, 40), data_type_size=i32(b, 44), src_dev=(i32(b, 48), i32(b, 52)),
             dst_dev=(i32(b, 56), i32(b, 60)), customer_id=i32(b, 64), push=b[68],
             simple_app=b[69], data_size=i32(b, 72), key=u64(b, 80), addr=u64(b, 88),
             val_len=i32(b, 96), option=i32(b, 100), sid=i32(b, 104),
             zero_pads=b[20:24] + b[33:36] + b[70:72] + b[76:80] + b[108:112] == bytes(17))
    o = 112 + max(m["body_size"], 0)
    m["data_types"] = tuple(i32(b, o + 4 * i) for i in range(max(m["data_type_size"], 0))
                            if o + 4 * i + 4 <= len(b))
    o += 4 * max(m["data_type_size"], 0)
    nodes = []
    if m["cmd"] != 0:
        for _ in range(max(m["node_size"], 0)):
            if o + 552 <= len(b):
                nodes.append(decode_node(b, o))
            o += 552
    m["length_ok"] = o == len(b)
    return m, nodes


# ---------------------------------------------------------------- messages --
def messages(cap, names):
    """Every message of the capture: dicts with time, path, sender id string
    ("ps8", or "anon"), receiver (node name or "ps<id>"), meta, nodes and data
    frame sizes, in time order; and {"ps<id>": node name}."""
    conns = defaultdict(dict)
    for (sid, sp, dp), v in streams(cap).items():
        conns[sid][(sp, dp)] = v
    rows = []
    for sid, dirs in conns.items():
        ident = b""
        for (sp, dp), (data, _) in dirs.items():
            if dp in names:  # the side that connected: the DEALER
                ready, _ = parse_zmtp(data)
                ident = (ready or {}).get("Identity", b"")
        for (sp, dp), (data, times) in dirs.items():
            _, msgs = parse_zmtp(data)
            for off, frames in msgs:
                fr = list(frames)
                if dp in names:  # DEALER -> ROUTER: [meta][data...]
                    path, sender, recv = "DEALER->ROUTER", ident.decode() or "anon", names[dp]
                else:  # ROUTER -> DEALER: [sender id][meta][data...]
                    if not fr:
                        continue
                    path, sender, recv = "ROUTER->DEALER", fr.pop(0).decode(), ident.decode()
                if not fr:
                    continue
                dec = decode_meta(fr[0])
                if dec is None:
                    continue
                rows.append(dict(t=time_at(times, off), stream=sid, path=path, sender=sender,
                                 recv=recv, meta=dec[0], nodes=dec[1], meta_len=len(fr[0]),
                                 data=tuple(len(x) for x in fr[1:])))
    rows.sort(key=lambda r: r["t"])
    ids = {}
    for r in rows:
        for n in r["nodes"]:
            if n["id"] != 32767 and n["port"] in names:
                ids["ps%d" % n["id"]] = names[n["port"]]
    return rows, ids


def node_of(x, ids, names=None):
    return ids.get(x, x)


def kind_of(r, ids):
    m, cmd = r["meta"], CMD.get(r["meta"]["cmd"], str(r["meta"]["cmd"]))
    to = node_of(r["recv"], ids)
    if cmd == "EMPTY":
        return "%s %s" % ("push" if m["push"] else "pull", "request" if m["request"] else "response")
    if cmd == "ADD_NODE":
        return "ADD_NODE registration" if r["sender"] == "anon" else "ADD_NODE node list"
    if cmd in ("HEARTBEAT", "ACK"):
        return "%s to the %s" % (cmd, "scheduler" if to == "sched" else "node")
    return "%s %s" % (cmd, "request" if m["request"] else "response")


def sender_name(r, ids, names):
    if r["sender"] == "anon" and r["nodes"]:
        for p, n in names.items():
            if p == r["nodes"][0]["port"]:
                return n
    return node_of(r["sender"], ids)


# ----------------------------------------------------------------- commands --
def cmd_dump(cap, names):
    rows, ids = messages(cap, names)
    for r in rows:
        m = dict(r["meta"])
        print("%.4f stream %-3d %-15s %s -> %s  %s  meta %d B, data %s" % (
            r["t"], r["stream"], r["path"], sender_name(r, ids, names),
            node_of(r["recv"], ids), kind_of(r, ids), r["meta_len"], list(r["data"])))
        print("    ", m)
        for n in r["nodes"]:
            print("     node", n)


def masked(r, ids):
    """The fields of a message that must agree between implementations."""
    m, cmd = dict(r["meta"]), r["meta"]["cmd"]
    for f in ("timestamp", "addr", "msg_sig"):
        m[f] = "*"
    if cmd != 0:  # control: key, val_len, option, sid are unspecified
        m["key"] = m["val_len"] = m["option"] = m["sid"] = "unspec"
        if cmd in (3, 9) and not m["request"]:
            m["barrier_group"] = "unspec"
    elif m["request"]:
        m["key"] = m["option"] = m["sid"] = "unspec"
        m["val_len"] = "elements" if m["val_len"] else 0
    else:  # response: echoes (checked by `echo`), sid unspecified
        m["key"] = m["option"] = m["val_len"] = "echo"
        m["sid"] = "unspec"
    m["frames"] = (r["meta_len"],) + r["data"]
    m["path"] = r["path"]
    for i, n in enumerate(r["nodes"]):
        n = dict(n)
        n["port"] = n["ports0"] = "*"
        n["id"] = "assigned" if n["id"] != 32767 else 32767
        if n["role"] != 2:
            n["dev_types0"] = n["dev_ids0"] = "unspec"
        else:
            n["customer_id"] = "unspec"
        m["node%d" % i] = tuple(sorted(n.items()))
    return tuple(sorted(m.items()))


def cmd_compare(caps):
    kinds = defaultdict(lambda: defaultdict(set))
    for cap, names, impl in caps:
        rows, ids = messages(cap, names)
        for r in rows:
            who = impl.get(sender_name(r, ids, names), "?")
            kinds[kind_of(r, ids)][who].add(masked(r, ids))
    for kind in sorted(kinds):
        by = kinds[kind]
        vals = {w: defaultdict(set) for w in by}
        for w, sigs in by.items():
            for s in sigs:
                for k, v in s:
                    vals[w][k].add(v)
        print("== %s: %s" % (kind, ", ".join("%d from %s" % (len(by[w]), IMPL_NAME.get(w, w))
                                              for w in sorted(by))) + " distinct form(s)")
        if "c" in vals and "p" in vals:
            keys = sorted(set(vals["c"]) | set(vals["p"]))
            diff = [k for k in keys if vals["c"][k] != vals["p"][k]]
            for k in diff:
                print("   differs: %-14s C++ %s | pslite %s" % (
                    k, sorted(map(str, vals["c"][k]))[:4], sorted(map(str, vals["p"][k]))[:4]))
            if not diff:
                print("   identical (outside the masked fields)")
        else:
            print("   sent by one implementation only in these captures")


def cmd_echo(cap, names, impl):
    rows, ids = messages(cap, names)
    reqs, stats, lists = {}, defaultdict(lambda: [0, 0]), []
    for r in rows:
        m = r["meta"]
        s, to = sender_name(r, ids, names), node_of(r["recv"], ids)
        if m["cmd"] == 2 and s == "sched" and r["sender"] != "anon":
            lists.append("%s(ts %d)" % (to, m["timestamp"]))
        if m["cmd"] != 0:
            continue
        if m["request"]:
            reqs[(s, to, m["timestamp"], m["push"])] = m
            continue
        q = reqs.get((to, s, m["timestamp"], m["push"]))
        key = (IMPL_NAME.get(impl.get(s), "?"), "push" if m["push"] else "pull")
        bad = ["no request"] if q is None else [
            f for f in ("timestamp", "customer_id", "head", "key", "addr", "val_len", "option",
                        "app_id") if q[f] != m[f]]
        stats[key][1 if bad else 0] += 1
        if bad and stats[key][1] <= 3:
            print("   not echoed:", key, s, "->", to, bad)
    for k, (ok, bad) in sorted(stats.items()):
        print("%-6s server, %s responses: %d echo every field, %d do not" % (k[0], k[1], ok, bad))
    print("node lists from the %s scheduler, in sending order (by ts): %s" % (
        IMPL_NAME.get(impl.get("sched"), "?"),
        " ".join(sorted(lists, key=lambda x: int(x.split("ts ")[1][:-1])))))


def cmd_acks(cap, names, impl):
    rows, ids = messages(cap, names)
    port_id = {}
    for r in rows:
        for n in r["nodes"]:
            if n["id"] != 32767:
                port_id[n["port"]] = n["id"]
    name_id = {names[p]: i for p, i in port_id.items() if p in names}
    acks, sent = defaultdict(set), []
    for r in rows:
        if not r["sender"].startswith("ps"):
            continue  # anonymous (registration): cannot be ACKed
        snd = int(r["sender"][2:])
        rcv = name_id.get(r["recv"]) if r["path"] == "DEALER->ROUTER" else (
            int(r["recv"][2:]) if r["recv"].startswith("ps") else None)
        if rcv is None or rcv == snd:
            continue
        m = r["meta"]
        if m["cmd"] == 4:
            acks[(snd, rcv)].add(m["msg_sig"])
        elif m["cmd"] != 1:
            low = ((m["timestamp"] << 1) | m["request"]) & 0xFFFFFFFF
            if low & 0x80000000:
                low |= 0xFFFFFFFF00000000  # sign-extended, as C++ computes it
            sig = ((m["app_id"] & 0xFFFF) << 48) | ((snd & 0xFF) << 40) | ((rcv & 0xFF) << 32) | low
            sent.append((r["t"], snd, rcv, m, sig & 0xFFFFFFFFFFFFFFFF))
    id_name = {i: n for n, i in name_id.items()}
    stats = defaultdict(lambda: [0, 0])
    for t, snd, rcv, m, sig in sent:
        key = "%s -> %s" % (IMPL_NAME.get(impl.get(id_name.get(snd)), "?"),
                            IMPL_NAME.get(impl.get(id_name.get(rcv)), "?"))
        ok = sig in acks[(rcv, snd)]
        stats[key][0 if ok else 1] += 1
        if not ok:
            print("   not ACKed: %.4f %s -> %s %s ts %d" % (t, id_name.get(snd), id_name.get(rcv),
                                                         CMD.get(m["cmd"]), m["timestamp"]))
    for k, (ok, bad) in sorted(stats.items()):
        print("%-16s %d messages ACKed with the right msg_sig, %d not" % (k, ok, bad))


def parse_ports(s):
    return dict((int(k), v) for k, v in (x.split("=") for x in s.split(",")))


def parse_impl(s):
    return dict(x.split("=") for x in s.split(","))


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    what = argv[1]
    if what == "dump":
        cmd_dump(argv[2], parse_ports(argv[3]))
    elif what == "compare" and len(argv) >= 5 and (len(argv) - 2) % 3 == 0:
        cmd_compare([(argv[i], parse_ports(argv[i + 1]), parse_impl(argv[i + 2]))
                     for i in range(2, len(argv), 3)])
    elif what in ("echo", "acks") and len(argv) == 5:
        (cmd_echo if what == "echo" else cmd_acks)(argv[2], parse_ports(argv[3]),
                                                   parse_impl(argv[4]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
