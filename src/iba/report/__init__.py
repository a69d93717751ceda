"""Reports from stored runs: data (loading), table (Markdown/CSV values), tables (Tables 4, 5, 9,
per scenario, cost, bootstrap intervals, paired differences), analyses (Figure 5 and judge
agreement), attribution (per checkpoint/slot: evidence kept x applied), intervals (bootstrap and
paired tests), plots (PNG), html (the self-contained page) and cli (`iba report`, `build_report`)."""
