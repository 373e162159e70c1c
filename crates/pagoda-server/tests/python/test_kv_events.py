"""A prefix-aware router's copy of one Pagoda replica's prefix cache, built from its KV events
with the clients such routers use (pyzmq, msgpack).

Usage: python3 test_kv_events.py PUB_ENDPOINT REPLAY_ENDPOINT BASE_URL TOPIC BLOCK_SIZE HASH_SEED
Subscribes, runs a workload of token prompts sharing prefixes under three cache salts, reads
the live stream and a replay, checks every message, and prints the final index as JSON
({"hashes": [...], ...}) for tests/kv_events.rs to compare with the engine's own.
"""

import json
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import msgpack
import xxhash
import zmq

PUB, REPLAY, BASE, TOPIC = sys.argv[1:5]
BLOCK_SIZE, SEED = int(sys.argv[5]), int(sys.argv[6])
SALTS = [None, "tenant-a", "tenant-b"]
MASK64 = (1 << 64) - 1


def post(path, body):
    request = urllib.request.Request(
        BASE + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.load(response)


def model_name():
    with urllib.request.urlopen(BASE + "/v1/models", timeout=30) as response:
        return json.load(response)["data"][0]["id"]


def workload(model):
    """Prompts share 3 blocks per group; every group runs under each salt, twice."""
    prompts = []
    for group in range(6):
        prefix = [100 + group * 50 + i for i in range(3 * BLOCK_SIZE)]
        for k in range(3):
            suffix = [700 + group * 10 + k] * (BLOCK_SIZE + 3)
            prompts.append(prefix + suffix)
    jobs = [(p, salt) for _ in range(2) for p in prompts for salt in SALTS]

    def run(job):
        prompt, salt = job
        body = {"model": model, "prompt": prompt, "max_tokens": 3, "temperature": 0}
        if salt is not None:
            body["cache_salt"] = salt
        answer = post("/v1/completions", body)
        cached = answer["usage"].get("prompt_tokens_details", {}) or {}
        return prompt, salt, cached.get("cached_tokens", 0) or 0

    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(run, jobs))


def receive_live(socket, out, stop):
    while not stop.is_set() or socket.poll(1000):
        if socket.poll(100):
            out.append(socket.recv_multipart())


def replay(ctx, start):
    dealer = ctx.socket(zmq.DEALER)
    dealer.connect(REPLAY)
    dealer.send_multipart([b"", start.to_bytes(8, "big")])
    got = []
    while True:
        assert dealer.poll(10_000), "replay did not end"
        frames = dealer.recv_multipart()
        assert len(frames) == 3 and frames[0] == b"", frames
        seq = int.from_bytes(frames[1], "big", signed=True)
        if seq == -1:
            assert frames[2] == b""
            break
        got.append((seq, frames[2]))
    dealer.close()
    return got


def salt_bytes(salt):
    if salt is None:
        return b"\x00"
    raw = salt.encode()
    return b"\x01" + len(raw).to_bytes(8, "little") + raw


def block_hash(parent, tokens, salt):
    """Pagoda's block hash (crates/pagoda-engine/src/kv_cache/block_hash.rs)."""
    data = parent.to_bytes(16, "little") + len(tokens).to_bytes(8, "little")
    data += b"".join(t.to_bytes(4, "little") for t in tokens) + salt_bytes(salt)
    return xxhash.xxh3_128_intdigest(data)


ROOT = xxhash.xxh3_128_intdigest(b"pagoda-block-hash-root" + SEED.to_bytes(8, "little"))


class Index:
    def __init__(self):
        self.blocks = set()
        self.full = {}  # announced 64-bit hash -> the 128-bit hash recomputed from its tokens
        self.salt_of_chunk = {}  # (parent, tokens) -> {salt: hash}
        self.stored = self.removed = 0

    def apply(self, batch):
        assert isinstance(batch, list) and len(batch) == 3, batch
        ts, events, rank = batch
        assert isinstance(ts, float) and ts > 1.6e9 and rank == 0
        for event in events:
            kind = event[0]
            if kind == "AllBlocksCleared":
                assert len(event) == 1
                self.blocks.clear()
            elif kind == "BlockStored":
                self.store(event)
            elif kind == "BlockRemoved":
                assert len(event) == 3 and event[2] == "GPU", event
                for h in event[1]:
                    assert h in self.blocks, "removed a block never stored"
                    self.blocks.remove(h)
                    self.removed += 1
            else:
                raise AssertionError(f"unknown event {kind}")

    def store(self, event):
        assert len(event) == 9, event
        _, hashes, parent, tokens, block_size, lora_id, medium, lora_name, extra = event
        assert block_size == BLOCK_SIZE and lora_id is None and lora_name is None
        assert medium == "GPU"
        assert len(tokens) == BLOCK_SIZE * len(hashes) and len(extra) == len(hashes)
        salts = {None if e is None else tuple(e) for e in extra}
        assert len(salts) == 1, "one event, one salt"
        salt = salts.pop()
        assert salt is None or len(salt) == 1
        salt = None if salt is None else salt[0]
        if parent is None:
            full_parent = ROOT
        else:
            assert parent in self.full, "parent never announced"
            full_parent = self.full[parent]
        for i, h in enumerate(hashes):
            chunk = tokens[i * BLOCK_SIZE:(i + 1) * BLOCK_SIZE]
            full = block_hash(full_parent, chunk, salt)
            assert full & MASK64 == h, "the hash does not follow from the event"
            assert h not in self.blocks, "stored twice"
            self.blocks.add(h)
            self.full[h] = full
            self.salt_of_chunk.setdefault((full_parent, tuple(chunk)), {})[salt] = h
            self.stored += 1
            full_parent = full

    def hashes_of(self, prompt, salt, num_tokens):
        parent, out = ROOT, []
        for i in range(num_tokens // BLOCK_SIZE):
            parent = block_hash(parent, prompt[i * BLOCK_SIZE:(i + 1) * BLOCK_SIZE], salt)
            out.append(parent & MASK64)
        return out


def main():
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, TOPIC.encode())
    sub.connect(PUB)
    time.sleep(0.5)  # the subscription must reach the publisher; earlier batches come from replay
    live, stop = [], threading.Event()
    reader = threading.Thread(target=receive_live, args=(sub, live, stop))
    reader.start()
    results = workload(model_name())
    stop.set()
    reader.join()

    # Live messages: the topic, consecutive sequence numbers.
    assert live, "no live message"
    seqs = [int.from_bytes(m[1], "big") for m in live]
    assert all(len(m) == 3 and m[0] == TOPIC.encode() for m in live)
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), "gap in the live stream"

    # A replay from 0 holds everything, byte for byte what was sent live.
    history = replay(ctx, 0)
    assert [s for s, _ in history] == list(range(len(history))), "gap in the replay"
    assert history[-1][0] == seqs[-1], "the replay ends where the live stream does"
    for m, s in zip(live, seqs):
        assert history[s][1] == m[2], f"replayed batch {s} differs from the live one"
    middle = seqs[len(seqs) // 2]
    assert replay(ctx, middle) == history[middle:], "a replay from the middle"

    index = Index()
    first = msgpack.unpackb(history[0][1])
    assert first[1][0] == ["AllBlocksCleared"], "the first batch clears a router's copy"
    for _, payload in history:
        index.apply(msgpack.unpackb(payload))

    # Every prefix hit the engine reported was on blocks announced before.
    hits = 0
    for prompt, salt, cached in results:
        if cached:
            hits += 1
            for h in index.hashes_of(prompt, salt, cached):
                assert h in index.full, "a hit on a block never announced"
    assert hits > 0, "the workload never hit the prefix cache"
    # Salts separate tenants: the shared prefix's first block was stored under each salt, with
    # three different hashes.
    first_block = (ROOT, tuple(range(100, 100 + BLOCK_SIZE)))
    per_salt = index.salt_of_chunk.get(first_block, {})
    assert set(per_salt) == set(SALTS) and len(set(per_salt.values())) == 3, per_salt
    assert index.removed > 0, "the workload never evicted a block"

    print(json.dumps({
        "hashes": sorted(index.blocks),
        "stored": index.stored,
        "removed": index.removed,
        "last_seq": seqs[-1],
        "hits": hits,
    }))


if __name__ == "__main__":
    main()
