"""Whether a watched file changed, without reading it.

A file's stamp is its modification time, size and inode: a ConfigMap or cert-manager update
swaps a symlink, which changes the inode even when the time and size look the same. A file
that does not exist has the stamp None.
"""

from __future__ import annotations

import os
from typing import Optional

Stamp = Optional[tuple[int, int, int]]


def file_stamp(path: str) -> Stamp:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino
