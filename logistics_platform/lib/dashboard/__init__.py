"""What the operations dashboard shows, as pure functions over the published marts (the pages only draw it)."""
