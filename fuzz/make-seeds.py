#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (all but schema_validate).

Seeds named `v-*` come from the shared test vectors (../../shared/vectors,
or the directory given as the first argument); seeds named `c-*` are
requests the conformance suite sends (conformance/src/checks/*.rs), written
out here. Each target's input layout is described at the top of its file in
fuzz_targets/. Running the script replaces every `v-*` and `c-*` file under
seeds/<target>/ and leaves other files (schema_validate's) alone.

    python3 fuzz/make-seeds.py [VECTORS_DIR]

Standard library only.
"""

import base64
import json
import os
import struct
import sys
from pathlib import Path
from urllib.parse import urlencode

FUZZ = Path(__file__).resolve().parent
SEEDS = FUZZ / "seeds"
TARGETS = [
    "filter",
    "query_string",
    "authorization",
    "bearer",
    "key_headers",
    "write_body",
    "range",
    "consent",
    "events",
    "route",
]

# Values the conformance requests and core's write tests use.
ID = "0123456789abcdef0123456789abcdef"
HASH = "8456fcfc74e54a91aa7729d7c3d52bfc3406aca5d4ec49f087c5b9b45a686e99"
ALICE = "alice.example"
BOB = "bob.example"
# The write_body target's store (see fuzz_targets/write_body.rs): the note
# type, Alice's note 'a…a' and Bob's note 'b…b', at its fixed clock.
BUILTIN_TYPE = {
    "entity": "system.folio.dev",
    "record_id": "4f1f0a1c9a6b4d0e8a3c2b7d5e6f7a81",
    "version_hash": "2ad282c56767d277c2eed0b71151abd5208fae42b7a9157bcbc7cb2fe6a0c96a",
}
NOTE_TYPE = {
    "entity": ALICE,
    "record_id": "7" * 32,
    "version_hash": "8681aab44c7b653d2e1a6b6bd70d14943d3b4a9c46aeffa6d2e1f84d8dbc4198",
}
NOTE_A_HASH = "baaea33fa06b057de65d204a537fa553e5ceb989afc5ad5a01990ad4c15b99d2"
LATER = "2026-11-21T11:00:00.0000000Z"


def vectors_dir():
    if len(sys.argv) > 1:
        return Path(sys.argv[1])
    return FUZZ.parent.parent / "shared" / "vectors"


def load(name):
    with open(vectors_dir() / name, encoding="utf-8") as file:
        return json.load(file)


def as_bytes(value):
    return value if isinstance(value, bytes) else value.encode("utf-8")


def u64(n):
    return struct.pack("<Q", n)


def js(value):
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def vector_seeds():
    seeds = {target: {} for target in TARGETS}

    for case in load("filters.json"):
        seeds["filter"]["v-" + case["name"]] = case["filter"]

    for case in load("query-strings.json"):
        query = case["query_string"]
        seeds["query_string"]["v-" + case["name"]] = query
        if case["endpoint"] == "events":
            seeds["events"]["v-" + case["name"]] = b"7\0" + as_bytes(query) + b"\0" + u64(1) + u64(9)

    for case in load("signatures.json"):
        name = "v-" + case["name"]
        target = case["path_and_query"]
        seeds["route"].setdefault("v-" + target.split("?")[0].replace("/", "_"), target.split("?")[0])
        if case["kind"] == "authorization_header":
            seeds["authorization"][name] = case["authorization_header"]
            for header, value in case["headers"]:
                if header.endswith("-credentials"):
                    # Flags: credentials only, in the dialect of its name.
                    flags = 1 if header.startswith("x-svc") else 5
                    seeds["key_headers"][name] = bytes([flags]) + as_bytes(value)
                elif header == "last-event-id":
                    seeds["events"][name] = as_bytes(value) + b"\0" + as_bytes(target.split("?", 1)[-1])
                elif header.endswith("-client-id"):
                    seeds["events"].setdefault("v-client-id", as_bytes(value) + b"\0\0")
                elif header == "range":
                    seeds["range"][name] = u64(4096) + as_bytes(value)
        else:
            separator = "&" if "?" in target else "?"
            seeds["bearer"][name] = f"{target}{separator}bearer={case['token_base64']}"
            seeds["bearer"][name + "-url"] = f"{target}{separator}bearer={case['token_base64url_unpadded']}"
        key = f'algorithm="ed25519" public_key="{case["public_key_base64"]}"'
        seeds["key_headers"].setdefault("v-public-key-" + case["public_key_base64"][:8].replace("/", "_"), b"\x02\0" + as_bytes(key))
    return seeds


def conformance_seeds():
    seeds = {target: {} for target in TARGETS}

    # conformance/src/checks/filters.rs
    filters = {
        "author": f"$['author']={ALICE}",
        "tag": "$['content']['tags'][*]=\"alpha\"",
        "record-link": f"$['content']['ref']={ALICE}+{ID}",
        "version-link": f"$['content']['pinned']={ALICE}+{ID}+{HASH}",
        "no-value": "$['content']['ref']=",
        "anywhere": "\"beta\"",
        "parentheses": f"$['type']=types.example+{ID},($['content']['n']=\"1\",$['content']['n']=\"2\")",
        "nested": "(\"a\",(\"b\",(\"c\",\"d\")))",
        "id": f"$['id']=\"{ID}\"",
        "source": "$['source']=\"self\"",
        "space-for-plus": f"$['type']=types.example {ID}",
        "dot-path": "$.content.tags[*]=\"x\",$.author=bob.example",
        "nine-levels": "(" * 9 + "\"x\"" + ")" * 9,
    }
    for name, text in filters.items():
        seeds["filter"]["c-" + name] = text

    # conformance/src/checks/list.rs, versions.rs, events.rs
    queries = {
        "list-tag-sort": [("sort", "$['content']['title']+asc"), ("min", "\"apple\"+" + ID), ("page_size", "2")],
        "list-distinct": [("distinct", "$['content']['conversation']"), ("page_size", "7"), ("include_deleted", "true")],
        "list-page-start": [("sort", "$['created_at']+desc"), ("page_start", "\"2023-11-14T22:13:20.0000000Z\"+" + ID)],
        "list-sources": [("sources", "self,notification,unknown"), ("filter", "$['content']['title']=")],
        "versions": [("page_size", "1"), ("page_start", "\"2026-11-21T10:00:00.0000000Z\"")],
        "events-ignored": [("include_links", "entity"), ("page_size", "0")],
        "repeated": [("page_size", "2"), ("page_size", "3")],
    }
    for name, pairs in queries.items():
        seeds["query_string"]["c-" + name] = "?" + urlencode(pairs)
    seeds["query_string"]["c-tag-bound"] = b"?sort=%24%5B%27content%27%5D%5B%27title%27%5D%2Bdesc\0zebra"

    # conformance/src/checks/auth.rs: headers a client gets wrong.
    seeds["authorization"]["c-lowercase-scheme"] = (
        f'svc id="{ID}" ts="1795000000000" nonce="n1" headers="" signature="{"A" * 86}=="'
    )
    seeds["authorization"]["c-commas"] = (
        f'SVC algorithm="ed25519", id="{ID}", ts="0", nonce="0123456789", '
        f'headers="range,x-svc-content-sha256", signature="{"_" * 86}"'
    )

    # conformance/src/checks/bearer.rs
    token = base64.b64encode(f"{ID}\\1795000000000\\{'A' * 86}==".encode()).decode()
    seeds["bearer"]["c-include-links"] = f"/api/me/records/{ALICE}/{ID}?include_links=entity&bearer={token}"
    seeds["bearer"]["c-no-bearer"] = f"/api/me/records/{ALICE}/{ID}?bearerish=1"

    # conformance/src/checks/registration.rs: both headers, uppercase names.
    key = 'algorithm="ed25519" public_key="QNt1o4ZitcXjBM2VYT3tNwWoIMhD5NCGXjgcdY72aqI="'
    seeds["key_headers"]["c-both-headers"] = b"\x03" + as_bytes(key) + b"\0" + as_bytes(key)
    seeds["key_headers"]["c-uppercase-names"] = b"\x0a\0" + as_bytes(key.replace(" ", ", "))
    seeds["key_headers"]["c-no-algorithm"] = b'\x01public_key="QNt1o4ZitcXjBM2VYT3tNwWoIMhD5NCGXjgcdY72aqI="'

    # conformance/src/checks/records.rs, updates.rs, links.rs, scopes.rs,
    # types.rs. First byte: method (0 POST, 1 PUT, 2 DELETE), record
    # (bits 2-3: Alice's note, the type, Bob's note, none) and who writes
    # (bits 4-5: owner, note-writing app, read-only app, stranger).
    writes = {
        "create": (0x00, {"type": NOTE_TYPE, "content": {"text": "hi"}}),
        "create-replayable": (0x00, {
            "id": "c" * 32, "created_at": "2026-11-20T08:00:00.7654321Z", "type": NOTE_TYPE,
            "permissions": {"read": [{"entity": BOB}]},
            "content": {"text": "hi", "parent": {"entity": ALICE, "record_id": "a" * 32}},
        }),
        "create-links": (0x10, {"type": NOTE_TYPE, "include_links": ["entity", "existential"], "content": {
            "text": "links", "mention": {"entity": BOB},
            "see_also": {"entity": ALICE, "record_id": "a" * 32},
            "quote": {"entity": ALICE, "record_id": "a" * 32, "version_hash": NOTE_A_HASH},
            "attachment": {"hash": "8456fcfc74e54a91aa7729d7c3d52bfc3406aca5d4ec49f087c5b9b45a686e99",
                           "type": "text/plain", "name": "b.txt"},
        }}),
        "create-type": (0x00, {"type": BUILTIN_TYPE, "content": {"name": "task", "schema": {
            "type": "object", "properties": {"content": {"type": "object", "properties": {
                "title": {"type": "tag_link", "sort_property": True},
                "done": {"type": "boolean", "optional": True},
                "items": {"type": "array", "items": {"type": "string"}, "max_items": 3, "optional": True},
            }}}}}}),
        "put-replayable": (0x01, {"version": {"parent_hash": NOTE_A_HASH, "created_at": LATER},
                                  "content": {"text": "edited"}, "permissions": {"read": "public"}}),
        "post-update": (0x00, {"id": "a" * 32, "author": {"entity": ALICE},
                               "version": {"parent_hash": NOTE_A_HASH}, "content": {"text": "by POST"}}),
        "delete-replayable": (0x02, {"version": {"parent_hash": NOTE_A_HASH, "created_at": LATER},
                                     "no_content": {"action": "delete"}}),
        "delete-type": (0x06, b""),
        "leave-bobs": (0x0a, {"no_content": {"action": "leave"}}),
        "app-local": (0x22, {"no_content": {"action": "local"}}),
        "stranger-put": (0x31, {"content": {"text": "no"}}),
        "conflict": (0x01, {"version": {"parent_hash": "0" * 64}, "content": {"text": "late"}}),
        "array-body": (0x00, b"[]"),
    }
    for name, (choice, body) in writes.items():
        body = body if isinstance(body, bytes) else as_bytes(js(body))
        seeds["write_body"]["c-" + name] = bytes([choice]) + body

    # conformance/src/checks/blobs.rs, on its 1,024-byte blob.
    ranges = {
        "closed": "bytes=10-19",
        "open-ended": "bytes=1000-",
        "suffix": "bytes=-24",
        "unsatisfiable": "bytes=5000-6000",
        "several": "bytes=0-1,5-6",
        "padded": " BYTES = 0-9 ,",
        "huge": "bytes=99999999999999999999999-",
    }
    for name, header in ranges.items():
        seeds["range"]["c-" + name] = u64(1024) + as_bytes(header)
    seeds["range"]["c-empty-blob"] = u64(0) + b"bytes=-5"

    # conformance/src/checks/consent.rs: the forms the page posts, and cookies.
    cookie = "__Host-folio_session=v1.bWU.1.1795000900000.01010101010101010101010101010101." + "0" * 64
    forms = {
        "sign-in": [("csrf", "ab" * 32), ("action", "sign_in"), ("password", "not-the-password")],
        "approve": [("csrf", "ab" * 32), ("action", "approve"), ("read", f"types.example {ID}"),
                    ("write", f"types.example {ID}"), ("subscribe", f"types.example {ID}")],
        "deny": [("csrf", "ab" * 32), ("action", "deny")],
        "missing-csrf": [("action", "sign_in"), ("password", "x")],
    }
    for name, pairs in forms.items():
        seeds["consent"]["c-" + name] = as_bytes(urlencode(pairs)) + b"\0a=b; " + as_bytes(cookie)

    # conformance/src/checks/events.rs
    events = {
        "last-event-id": b"7\0?min=%222026-11-21T10%3A00%3A00.000Z%22\0" + u64(1) + u64(9),
        "unknown-id": b"no-such-event\0?include_links=entity&page_size=0",
        "leading-zero": b"007\0\0" + u64(0) + u64(7),
        "largest": b"18446744073709551615\0?include_deleted=true",
    }
    for name, data in events.items():
        seeds["events"]["c-" + name] = data

    # conformance/src/checks/errors.rs, consent.rs, blobs.rs; core's route tests.
    routes = {
        "discovery": "/",
        "error-type": "/docs/error-types/request/404-not-found",
        "consent": f"/me/auth/{ID}",
        "blob-space": f"/api/me/records/{ALICE}/{ID}/blobs/{HASH}/a%20b.png",
        "blob-version": f"/api/me/records/{ALICE}/{ID}/versions/{HASH}/blobs/{HASH}/caf%C3%A9.pdf",
        "blob-escape": f"/api/me/records/{ALICE}/{ID}/blobs/{HASH}/..%2Fsecret",
        "user-escape": "/api/m%C3%A9%20x/events",
        "server": "/api/nobody-1234/server",
        "user-name": "auth2",
    }
    for name, path in routes.items():
        seeds["route"]["c-" + name] = path
    return seeds


def main():
    written = 0
    vectors = vector_seeds()
    conformance = conformance_seeds()
    for target in TARGETS:
        directory = SEEDS / target
        directory.mkdir(parents=True, exist_ok=True)
        for old in directory.iterdir():
            if old.name.startswith(("v-", "c-")):
                old.unlink()
        for name, data in {**vectors[target], **conformance[target]}.items():
            safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:80]
            (directory / safe).write_bytes(as_bytes(data))
            written += 1
    print(f"wrote {written} seed files under {os.path.relpath(SEEDS)}")


if __name__ == "__main__":
    main()
