#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora, fuzz/corpus/<target>/<name>.

A few small inputs per target: valid ones, so that libFuzzer starts from
inputs that reach deep into each parser, and edge ones (empty, truncated,
limits). The binary formats are built here field by field, the way the
parsers read them; the harnesses' own input layouts (fuzz/<target>.cc)
follow libFuzzer's FuzzedDataProvider, which takes strings and bytes from
the front of the input and integers and booleans from its back.

    fuzz/make_corpus.py            rewrites every corpus
"""
import json
import os
import struct
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def u32(v):
    return struct.pack("<I", v)


def i64(v):
    return struct.pack("<q", v)


def field(s):
    """A length-prefixed string, as the store and tensor specs write one."""
    s = s if isinstance(s, bytes) else s.encode()
    return u32(len(s)) + s


def provider_string(s):
    """How FuzzedDataProvider::ConsumeRandomLengthString reads `s` back."""
    return s.replace(b"\\", b"\\\\") + b"\\x"


def store_handshake():
    nonce = b"n" * 32
    hello = b"\x01" + field("KOLO-STORE-2") + field(nonce) + i64(0) + field(b"p" * 32)
    return {
        "wrong_proof": u32(len(hello)) + hello,
        "client_rank": u32(len(hello)) + hello.replace(i64(0), i64(-1)),
        "bad_rank": u32(len(hello)) + hello.replace(i64(0), i64(-2)),
        "bad_magic": u32(len(hello)) + hello.replace(b"KOLO-STORE-2", b"KOLO-STORE-1"),
        "over_limit": u32(513) + b"\x01" * 64,
        "huge_length": u32(0xFFFFFFFF) + b"\x01",
        "truncated": u32(len(hello)) + hello[:20],
        "empty": b"",
    }


def store_message():
    """Requests, each a mode byte (sealed below 224) and a body."""
    bodies = {
        "set": b"\x02" + field("key") + field("value"),
        "get": b"\x03" + field("key") + i64(10),
        "add": b"\x04" + field("counter") + i64(3),
        "wait": b"\x05" + i64(2) + field("key") + field("counter") + i64(10),
        "goodbye": b"\x06",
        "unknown": b"\x63",
        "short_set": b"\x02" + u32(100) + b"k",
        "huge_wait": b"\x05" + i64(1 << 62) + field("k"),
    }

    def requests(pairs):
        front = b"".join(provider_string(body) for _, body in pairs)
        back = bytes(mode for mode, _ in reversed(pairs))
        return front + back

    seeds = {name: requests([(0, body)]) for name, body in bodies.items()}
    seeds["set_get_add"] = requests(
        [(0, bodies["set"]), (0, bodies["get"]), (0, bodies["add"])])
    seeds["unsealed"] = requests([(230, bodies["set"])])
    seeds["raw_length"] = requests([(250, u32(1 << 30) + b"x")])
    return seeds


def spec(name, count):
    """A tensor spec as runtime/tensor_spec.cc serialises it."""
    return (field(name) + struct.pack("<iiii", 0, 0, 0, -1) + i64(count) +
            u32(0) + u32(0) + field("") + struct.pack("<i", 0))


def cycle_report():
    """World size, capacity, exact-record flag and the records come from the
    back (each integer's last byte is its most significant); the payloads
    are the front."""

    def report(world, capacity, records, payloads, exact=True):
        # The first word consumed is the last 8 bytes, little-endian.
        back = b"".join(struct.pack("<Q", w) for w in reversed(records))
        # Consumed in order world, capacity, exact: the last byte first.
        tail = bytes([1 if exact else 0, capacity, world - 1])
        return payloads + back + tail

    def header(flags, version, payload, capacity):
        return [flags | version << 32, payload | capacity << 32]

    one_spec = u32(1) + spec("grad.w", 1000)
    empty = u32(0)
    seeds = {}
    # Two ranks, capacity 64 (one bit word): rank 0 announces a spec.
    records = header(1, 1, len(one_spec), 64) + [0b101] + header(1, 1, 0, 64) + [0]
    seeds["one_spec"] = report(2, 64, records, one_spec + empty)
    records = header(0, 1, 0, 64) + [1] + header(0, 1, 0, 64) + [1]
    seeds["cached_only"] = report(2, 64, records, b"")
    records = header(0, 2, 0, 64) + [0] + header(0, 1, 0, 64) + [0]
    seeds["wrong_version"] = report(2, 64, records, b"")
    records = header(0, 1, 4, 0) + header(0, 1, 4, 0)
    seeds["no_cache"] = report(2, 0, records, empty + empty)
    return seeds


def training_config():
    return {
        "deepspeed": b"""{
  "train_batch_size": 64,
  "train_micro_batch_size_per_gpu": 8,
  "gradient_accumulation_steps": 2,
  "gradient_clipping": 1.0,
  "optimizer": {"type": "AdamW", "params": {"lr": 0.001, "betas": [0.9, 0.999],
                "eps": 1e-8, "weight_decay": 0.01}},
  "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0,
                "warmup_max_lr": 0.001, "warmup_num_steps": 100}},
  "fp16": {"enabled": true, "loss_scale": 0, "initial_scale_power": 16,
           "loss_scale_window": 1000, "hysteresis": 2, "min_loss_scale": 1},
  "zero_optimization": {"stage": 2}
}
""",
        "bf16": b'{"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": true}}',
        "auto": b'{"train_batch_size": "auto", "optimizer": {"type": "SGD", "params": {"lr": "auto"}}}',
        "nulls": b'{"train_batch_size": null, "fp16": null, "bfloat16": {"enabled": false}}',
        "bad_stage": b'{"zero_optimization": {"stage": 3}}',
        "huge": b'{"train_batch_size": 9223372036854775807, "gradient_accumulation_steps": 2}',
        "not_json": b'{"train_batch_size": ',
        "empty": b"",
    }


def hostfile():
    return {
        "slots": b"# the cluster\nnode1 slots=4\nnode2 slots = 2 max_slots=8\n\n10.0.0.3:2\n",
        "ipv6": b"[fe80::1]:2\nfe80::2 slots=1 # trailing comment\n",
        "list": b"h1:2,h2:2,h3",
        "zero": b"node1 slots=0\n",
        "overflow": b"node1 slots=99999999999999999999\n",
        "garbage": b"node1 slots=\n=4\n:\n,,\n",
        "empty": b"",
    }


def http_request():
    return {
        "get": b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n",
        "head_query": b"HEAD /job?refresh=1 HTTP/1.0\r\n\r\n",
        "post": b"POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
        "bare_newlines": b"GET / HTTP/1.1\n\n",
        "no_version": b"GET /metrics\r\n\r\n",
        "one_space": b"GET \r\n\r\n",
        "unfinished": b"GET /metrics HTTP/1.1\r\nHost: x",
        "empty": b"",
    }


def metrics_arena():
    # First byte even: the rest is XORed onto a valid arena; odd: read
    # alone. Zeros keep the arena as it is; 4096 bytes reach past its
    # third descriptor, the histogram.
    return {
        "valid": b"\x00",
        "valid_prefix": b"\x00" * 4096,
        "flipped_header": b"\x00" + b"\xff" * 64,
        "truncated": b"\x01" + b"\x00" * 32,
        "empty": b"",
    }


def point_to_point_frame():
    """The script of fuzz/point_to_point_script.h: the transfers rank 0
    posts, then rank 1's frames (48-byte header, then payload)."""

    def header(kind, tag, dtype, result, count, sequence, payload):
        return struct.pack("<iiiiqQqq", kind, tag, dtype, result, count,
                           sequence, payload, 0)

    # One receive of 4 float32 with tag 1: count 0 -> 1 transfer; type 0,
    # count 4, tag 1, receive.
    posts = bytes([0, 0, 4, 1, 0])
    send_and_receive = bytes([1, 0, 2, 3, 1, 0, 4, 1, 0])
    return {
        "matching": posts + header(1, 1, 0, 0, 4, 0, 16) + b"\x00\x00\x80\x3f" * 4,
        "mismatched_count": posts + header(1, 1, 0, 0, 5, 0, 20) + b"\x00" * 20,
        "unexpected_tag": posts + header(1, 2, 0, 0, 4, 0, 16) + b"\x00" * 16,
        "ack": send_and_receive + header(2, 3, 0, 0, 2, 0, 0),
        "mismatch_ack": send_and_receive + header(2, 3, 0, 1, 2, 0, 0),
        "truncated_payload": posts + header(1, 1, 0, 0, 4, 0, 16) + b"\x00" * 8,
        "no_frames": posts,
    }


def tcp_hello():
    """Strangers' bytes (front) and, from the back, their number and
    whether each stays open."""
    hello = b"kolo-tcp" + struct.pack(">ii", 1, 0) + b"t" * 16
    return {
        "wrong_token": provider_string(hello) + bytes([1, 0]),
        "silent_open": provider_string(b"") + bytes([1, 0]),
        "three_strangers": provider_string(b"GET / HTTP/1.1\r\n\r\n") +
        provider_string(hello[:10]) + provider_string(b"\x00" * 64) +
        bytes([0, 1, 0, 2]),
    }


def dataset_header():
    """IDX: the images file as a provider string, then the labels file,
    then a last byte 1; CIFAR-10's test batch: the file, then a 0."""

    def words(*values):
        return b"".join(struct.pack(">I", v) for v in values)

    def idx(images, labels):
        return provider_string(images) + labels + b"\x01"

    record = bytes([3]) + bytes(range(256)) * 12
    return {
        "idx_two_images": idx(words(0x803, 2, 2, 2) + bytes(range(8)),
                              words(0x801, 2) + b"\x01\x09"),
        "idx_count_mismatch": idx(words(0x803, 1, 1, 1) + b"\x00",
                                  words(0x801, 2) + b"\x00\x00"),
        "idx_huge_dims": idx(words(0x803, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF),
                             words(0x801, 0)),
        "idx_wrong_magic": idx(words(0x801, 1), words(0x803, 1, 1, 1)),
        "idx_truncated": idx(words(0x803, 1), b""),
        "cifar_one_record": record + b"\x00",
        "cifar_bad_label": bytes([10]) + record[1:] + b"\x00",
        "cifar_short": record[:100] + b"\x00",
    }


def zero_manifest():
    """A manifest as ZeroOptimizer::Save writes one (nlohmann's dump(1),
    keys sorted) for an Adam-trained two-layer MLP in two shards, and
    edits of it that the parser must refuse."""

    def parameter(name, shape, offset):
        numel = 1
        for dim in shape:
            numel *= dim
        return {"name": name, "shape": shape, "offset": offset, "numel": numel}

    def manifest(**edits):
        files = ["zero-step30-00000000deadbeef-shard%d-of2.pt" % r
                 for r in range(2)]
        m = {
            "format": "kolo.zero-checkpoint", "version": 1, "shards": 2,
            "world_size": 2, "stage": 2, "optimizer": "adam",
            "state": ["exp_avg", "exp_avg_sq"], "optimizer_step": 30,
            "steps_taken": 30,
            "loss_scaler": {"scale": 65536.0, "iteration": 30,
                            "last_overflow_iteration": -1,
                            "hysteresis_left": 2, "clean_steps": 0,
                            "skipped_steps": 0},
            "buckets": [
                {"elements": 170, "padded": 170, "slice": 85, "parameters": [
                    parameter("fc2.bias", [10], 0),
                    parameter("fc2.weight", [10, 16], 10)]},
                {"elements": 144, "padded": 144, "slice": 72, "parameters": [
                    parameter("fc1.bias", [16], 0),
                    parameter("fc1.weight", [16, 8], 16)]},
            ],
            "files": files,
        }
        m.update(edits)
        return json.dumps(m, indent=1, sort_keys=True).encode()

    valid = json.loads(manifest())
    past_end = json.loads(manifest())
    past_end["buckets"][0]["parameters"][1]["offset"] = 11
    uneven = json.loads(manifest())
    uneven["buckets"][1]["slice"] = 71
    huge_shape = json.loads(manifest())
    huge_shape["buckets"][0]["parameters"][0]["shape"] = [1 << 32, 1 << 32]
    return {
        "valid": manifest(),
        "one_shard": manifest(shards=1, files=valid["files"][:1], buckets=[
            {"elements": 0, "padded": 0, "slice": 1, "parameters": []}]),
        "offset_past_bucket": json.dumps(past_end).encode(),
        "uneven_slices": json.dumps(uneven).encode(),
        "huge_shape": json.dumps(huge_shape).encode(),
        "file_outside": manifest(files=["../shard0.pt", "shard1.pt"]),
        "files_not_shards": manifest(shards=3),
        "wrong_format": manifest(format="kolo.checkpoint"),
        "truncated": manifest()[:200],
        "empty": b"",
    }


def checkpoint_header():
    """Each header field in kCheckpointHeaderKeys' order: from the back, a
    byte picks missing (0), an integer (1; 8 more bytes from the back), a
    string (2; from the front) or another kind (3; one more byte from the
    back picks its name)."""
    keys = ["epochs_done", "seed", "model_name", "dataset", "optimizer_name",
            "history"]

    def header(**fields):
        front = b""
        back = []  # in the order they are consumed, from the end inwards
        for key in keys:
            value = fields.get(key)
            if value is None:
                back.append(b"\x00")
            elif isinstance(value, int):
                back.append(b"\x01")
                # ConsumeIntegral<int64_t>: INT64_MIN + the bytes, the last
                # one most significant.
                back.append(struct.pack("<Q", (value + (1 << 63)) % (1 << 64)))
            elif isinstance(value, tuple):
                back.append(b"\x03" + bytes([value[1]]))
            else:
                back.append(b"\x02")
                front += provider_string(value.encode())
        return front + b"".join(reversed(back))

    # As kolo-train writes it after two epochs: the records of
    # EpochRecord (setup.cc), dumped by nlohmann (sorted keys, compact).
    record = ('{{"epoch":{},"images_per_second":41234.5,"lr":0.1,'
              '"seconds":1.5,"test_accuracy":0.8421,"test_correct":8421,'
              '"test_total":10000,"train_loss":0.4567}}')
    run = dict(epochs_done=2, seed=42, model_name="mlp",
               dataset="fashion-mnist", optimizer_name="sgd",
               history="[" + record.format(1) + "," + record.format(2) + "]")

    def edited(**edits):
        fields = dict(run)
        fields.update(edits)
        return header(**fields)

    return {
        "saved": header(**run),
        "fresh": edited(epochs_done=0, history="[]"),
        "negative_epochs": edited(epochs_done=-3),
        "seed_bits": edited(seed=-1),
        "missing_dataset": edited(dataset=None),
        "double_model": edited(model_name=("other", 0)),
        "history_object": edited(history="{}"),
        "history_numbers": edited(history="[1,2]"),
        "history_truncated": edited(history="[" + record.format(1)[:40]),
        "empty": b"",
    }


def write(target, seeds):
    folder = os.path.join(ROOT, target)
    os.makedirs(folder, exist_ok=True)
    for name in os.listdir(folder):
        os.remove(os.path.join(folder, name))
    for name, data in seeds.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)


def main():
    write("store_handshake_fuzzer", store_handshake())
    write("store_message_fuzzer", store_message())
    write("cycle_report_fuzzer", cycle_report())
    write("training_config_fuzzer", training_config())
    write("hostfile_fuzzer", hostfile())
    write("http_request_fuzzer", http_request())
    write("metrics_arena_fuzzer", metrics_arena())
    write("point_to_point_frame_fuzzer", point_to_point_frame())
    write("tcp_hello_fuzzer", tcp_hello())
    write("dataset_header_fuzzer", dataset_header())
    write("zero_manifest_fuzzer", zero_manifest())
    write("checkpoint_header_fuzzer", checkpoint_header())
    return 0


if __name__ == "__main__":
    sys.exit(main())
