from iba.adapters.prefeval_locate import locate_preference


def test_picks_the_turn_that_states_the_preference():
    turns = [
        "Hi, what time does the museum open on Sundays?",
        "Thanks. I usually prefer trains over planes because flying makes me anxious. Which route is scenic?",
        "Great, what should I pack for rain?",
    ]
    loc = locate_preference("I prefer travelling by train and avoid flying.", turns)
    assert loc.index == 1 and loc.score > loc.runner_up


def test_no_match_and_ambiguity_are_reported_not_guessed():
    pref = "I avoid spicy food."
    weak = locate_preference(pref, ["Tell me about volcanoes.", "How tall is Everest?"])
    assert weak.index is None and "best score" in weak.reason
    tie = locate_preference(pref, ["I tend to avoid spicy food at lunch.", "I usually avoid spicy food at dinner."])
    assert tie.index is None and "ambiguous" in tie.reason
    assert locate_preference(pref, []).index is None
