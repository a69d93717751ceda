"""Reports from stored runs: data (loading), table (Markdown/CSV values), tables (Tables 4, 5, 9,
per scenario, cost), analyses (Figure 5 and judge agreement), plots (PNG), html (the
self-contained page) and cli (`iba report`, `build_report`)."""
