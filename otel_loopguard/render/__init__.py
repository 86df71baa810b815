"""Self-contained HTML for people: one page skeleton and the run timeline (audit and
calibrate draw runs alike). Pure string building: no network, no CDN, no template engine."""
