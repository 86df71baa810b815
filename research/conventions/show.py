"""Print the attributes of selected spans of a capture: python show.py captures/X.json [name-substring ...]"""
import json
import sys

doc = json.load(open(sys.argv[1]))
subs = sys.argv[2:]
W = 400
seen = set()
for r in doc["spans"]:
    if subs and not any(s in r["name"] for s in subs):
        continue
    key = r["name"]
    print(f"=== {r['name']} kind={r['kind']} parent={r['parent_name']} status={r['status']} scope={r['scope']}")
    for k, v in sorted(r["attributes"].items()):
        sv = json.dumps(v) if not isinstance(v, str) else v
        print(f"   {k} = {sv[:W]}{'...' if len(sv) > W else ''}")
    print("   at_start:", r["attribute_keys_at_start"])
    for e in r["events"]:
        print("   event:", e["name"], json.dumps(e["attributes"])[:W])
