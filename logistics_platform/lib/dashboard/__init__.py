"""What the operations dashboard shows, as pure functions over the published marts (the Streamlit pages only draw it).

:mod:`.reader` opens the published Iceberg marts read-only; :mod:`.sla` (SLA windows and the open hour),
:mod:`.operations` (delivery time, revenue), :mod:`.travel` (a mart today against a daily tag) and :mod:`.health`
(backlog, quarantine, table health) turn what it read into the frames the pages draw.
"""
