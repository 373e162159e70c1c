#!/usr/bin/env python3
# Usage: health_during_big_prompt.py BASE_URL PROMPT_BYTES  (a server on the tiny fixture model).
# Polls /health every 10 ms while one request with a large prompt is tokenized; prints the
# slowest /health answer and how long the big request took.
import json, random, string, sys, threading, time, urllib.request
base = sys.argv[1]
size = int(sys.argv[2])
random.seed(1)
words = ["".join(random.choice(string.ascii_lowercase) for _ in range(random.randint(2, 9))) for _ in range(5000)]
text = []
n = 0
while n < size:
    w = random.choice(words)
    text.append(w); n += len(w) + 1
prompt = " ".join(text)[:size]
body = json.dumps({"prompt": prompt, "max_tokens": 1}).encode()
done = threading.Event()
result = {}
def big():
    t = time.time()
    req = urllib.request.Request(base + "/v1/completions", data=body, headers={"content-type": "application/json"})
    try:
        urllib.request.urlopen(req).read()
        result["status"] = 200
    except urllib.error.HTTPError as e:
        result["status"] = e.code
    result["secs"] = time.time() - t
    done.set()
th = threading.Thread(target=big); th.start()
worst = 0.0; count = 0
while not done.is_set():
    t = time.time()
    urllib.request.urlopen(base + "/health").read()
    worst = max(worst, time.time() - t); count += 1
    time.sleep(0.01)
th.join()
print(f"prompt {len(prompt)} bytes: status {result['status']} in {result['secs']:.2f} s; /health polled {count} times, slowest {worst*1000:.1f} ms")
