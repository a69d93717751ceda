"""Scoring (paper Appendix A.2, C.2, C.3): slots (CallAPI matching), verifiers (deterministic
checks), judge (LLM checkpoint judge), panel (judges x repeats), qa (the multiple-choice probe),
scoring (`score_record`, the entry point), aggregate (the instance-score rule), agreement
(raw, Gwet's AC1, Cohen/Fleiss kappa, Krippendorff's alpha) and cli (`iba score`)."""
