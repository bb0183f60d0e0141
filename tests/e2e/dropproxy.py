#!/usr/bin/env python3
"""dropproxy.py: a TCP proxy on 127.0.0.1 for the pull/push tests, standard library only.

  dropproxy.py --listen PORT --target PORT [--drop-after BYTES] [--rate BYTES_PER_S] [--log FILE]

Each connection to PORT is forwarded to 127.0.0.1:TARGET. With --drop-after, a connection is
cut (both sides closed, no more bytes) once it has sent BYTES to the client: a registry whose
network keeps failing mid-blob. With --rate, bytes to the client are paced to that rate per
connection, so that a test can kill a pull while it is surely in the middle.
"""
import argparse
import socket
import threading
import time


LOG_LOCK = threading.Lock()


def pump(src, dst, limit, rate, done, log_path=None):
    sent, start = 0, time.monotonic()
    try:
        while not done.is_set():
            want = 65536
            if limit is not None:
                want = min(want, limit - sent)
                if want <= 0:
                    break
            data = src.recv(want)
            if not data:
                break
            dst.sendall(data)
            sent += len(data)
            if rate:
                ahead = sent / rate - (time.monotonic() - start)
                if ahead > 0:
                    time.sleep(ahead)
    except OSError:
        pass
    if log_path:
        with LOG_LOCK, open(log_path, "a") as f:
            f.write("%d\n" % sent)
    # A drop closes both directions at once, as a dead network path would look to curl.
    done.set()
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def serve(client, target, args):
    try:
        upstream = socket.create_connection(("127.0.0.1", target))
    except OSError:
        client.close()
        return
    done = threading.Event()
    up = threading.Thread(target=pump, args=(client, upstream, None, 0, done), daemon=True)
    down = threading.Thread(target=pump, args=(upstream, client, args.drop_after, args.rate, done, args.log), daemon=True)
    up.start()
    down.start()
    up.join()
    down.join()
    client.close()
    upstream.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", type=int, required=True)
    ap.add_argument("--target", type=int, required=True)
    ap.add_argument("--drop-after", type=int, default=None)
    ap.add_argument("--rate", type=float, default=0)
    ap.add_argument("--log", default=None)
    args = ap.parse_args()
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", args.listen))
    ls.listen(64)
    while True:
        c, _ = ls.accept()
        threading.Thread(target=serve, args=(c, args.target, args), daemon=True).start()


if __name__ == "__main__":
    main()
