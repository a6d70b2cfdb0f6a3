# Adds a site "purge" whose 1,000,000 messages (10,000 conversations of 100) are 60 days old,
# to a stopped edge's database, and moves the id limits and the outbox watermark past them.
import sqlite3, sys, time, os, hashlib
db = sqlite3.connect(sys.argv[1])
retention = int(sys.argv[2])
old = int((time.time() - 60*86400) * 1000)
cur = db.cursor()
cur.execute("INSERT INTO sites (key, name, origins, created_at, retention_days) VALUES ('st_purge_me', 'purge', '*', ?, ?)", (old, retention))
site = cur.lastrowid
mid = (cur.execute("SELECT coalesce(max(id),0) FROM messages").fetchone()[0]) + 1
cid = (cur.execute("SELECT coalesce(max(id),0) FROM conversations").fetchone()[0]) + 1
vid = (cur.execute("SELECT coalesce(max(id),0) FROM visitors").fetchone()[0]) + 1
visitors, convs, msgs = [], [], []
for i in range(10000):
    v, c = vid + i, cid + i
    visitors.append((v, site, hashlib.sha256(b"purge-%d" % i).digest(), old))
    first = mid
    for k in range(100):
        msgs.append((mid, c, 'visitor' if k % 2 == 0 else 'operator', '', 'an old message number %d of conversation %d, long enough to look like one' % (k, c), 'c%d' % k if k % 2 == 0 else None, old + k, 'widget' if k % 2 == 0 else 'inbox'))
        mid += 1
    convs.append((c, site, v, first, mid - 1, old, old + 100))
cur.executemany("INSERT INTO visitors (id, site_id, token_hash, created_at) VALUES (?,?,?,?)", visitors)
cur.executemany("INSERT INTO conversations (id, site_id, visitor_id, first_message_id, last_message_id, created_at, updated_at) VALUES (?,?,?,?,?,?,?)", convs)
cur.executemany("INSERT INTO messages (id, conversation_id, author, name, text, client_id, created_at, source) VALUES (?,?,?,?,?,?,?,?)", msgs)
# With search (schema 17), the index holds every message's words, as the edge's writer adds them.
if cur.execute("SELECT count(*) FROM sqlite_master WHERE name = 'messages_fts'").fetchone()[0]:
    cur.executemany("INSERT INTO messages_fts (rowid, site, text) VALUES (?,?,?)", [(m[0], site, m[4]) for m in msgs])
cur.execute("UPDATE id_limits SET messages = max(messages, ?), conversations = max(conversations, ?)", (mid + 1, cid + 10001))
cur.execute("UPDATE outbox SET published_through = ?", (mid - 1,))
db.commit()
print("site", site, "messages", len(msgs), "last id", mid - 1)
