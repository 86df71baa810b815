"""What a restart must not forget: the state directory (`state_dir`).

directory.py opens it (lock, dedupe log, heartbeat); spool.py is the on-disk queue both the
forward queue and the finding queue write before they answer; judged.py keeps a request
there until every run it fed was judged; snapshot.py saves the open runs at shutdown and
restores them at start; handover.py is how a successor takes the directory over from a running
receiver without closing the port (the lock's owner record, the inboxes).
"""
