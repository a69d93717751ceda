"""Wrappers that turn a taxonomy cue into a user turn of one of Table 12's signal types,
plus the assistant replies and session openers around it. Pure data.

`{cue}` is the cue as a clause, `{Cue}` the same clause starting a sentence. No wrapper names a
dimension or a value: the cue carries the preference, the wrapper the signal type.
"""

from __future__ import annotations

# Explicit revision: the user asks to redo something so that it matches the preference.
EXPLICIT_REVISION: tuple[str, ...] = (
    "Hmm, can you redo this one? {Cue}.",
    "Could you take another pass at it? {Cue}.",
    "Let's try that again. {Cue}.",
    "Please rework the last version, because {cue}.",
    "Not quite. Can you revise it? {Cue}.",
    "I'd like you to change this before I use it. {Cue}.",
    "Scrap that version and start over, please. {Cue}.",
    "Can you fix this up? {Cue}.",
    "This needs another round. {Cue}.",
    "Close, but please adjust it: {cue}.",
    "Could you rewrite that for me? {Cue}.",
    "One more revision, please. {Cue}.",
    "Actually, change it. {Cue}.",
    "I'm sending this back for changes. {Cue}.",
    "Can you go back and redo that part? {Cue}.",
    "Let's swap that out. {Cue}.",
    "Redo it with this in mind: {cue}.",
    "Before I accept this, please rework it. {Cue}.",
    "Give it another go? {Cue}.",
    "Could we adjust this bit? {Cue}.",
    "Almost there, but {cue}.",
    "Try once more, keeping in mind that {cue}.",
    "This won't work as it is. {Cue}.",
    "Can you tweak it? {Cue}.",
    "Mind redoing it? {Cue}.",
    "Please change it so it fits me: {cue}.",
    "Hold on, that's not it. {Cue}.",
    "Round two, please. {Cue}.",
    "I'll need a different version, since {cue}.",
    "Let's rework it a little. {Cue}.",
)
# Complaint or strong affect about what the user did not want.
COMPLAINT: tuple[str, ...] = (
    "Ugh, that was really not what I wanted. {Cue}!",
    "Honestly, I'm pretty frustrated with how that turned out. {Cue}.",
    "I hated the last one, no offence. {Cue}.",
    "That was a mess, seriously. {Cue}!",
    "Why does this keep happening? {Cue}!",
    "I can't believe I have to say this again... {cue}.",
    "That drove me up the wall. {Cue}.",
    "Wow, no. Just no. {Cue}.",
    "This is exactly the kind of thing that annoys me. {Cue}.",
    "I'm so tired of getting stuff like that. {Cue}.",
    "Not happy with that at all. {Cue}.",
    "That was painful to deal with. {Cue}!",
    "I nearly gave up halfway through that. {Cue}.",
    "Seriously disappointed with the last attempt. {Cue}.",
    "That one really got on my nerves. {Cue}.",
    "I wasted half an hour on that. {Cue}!",
    "Honestly, that one annoyed me. {Cue}.",
    "That was a letdown. {Cue}.",
    "Oh come on. {Cue}!",
    "I'm not thrilled. {Cue}.",
    "That's the opposite of what I need. {Cue}.",
    "Did you forget? {Cue}!",
    "This again? {Cue}.",
    "That really bugged me, because {cue}.",
    "That really was not it. {Cue}.",
    "No, no, no. {Cue}!",
    "{Cue}!",
)
# Direct preference statement.
DIRECT_STATEMENT: tuple[str, ...] = (
    "Just so you know, {cue}.",
    "For what it's worth, {cue}.",
    "Something you should know about me: {cue}.",
    "Quick note for the future: {cue}.",
    "By the way, {cue}.",
    "I should mention that {cue}.",
    "Keep this in mind: {cue}.",
    "A bit of background on me: {cue}.",
    "To be upfront about it, {cue}.",
    "Let me tell you something about how I work: {cue}.",
    "Worth saying before we start: {cue}.",
    "In case it helps, {cue}.",
    "FYI, {cue}.",
    "I'll be honest, {cue}.",
    "Here's the thing about me: {cue}.",
    "Noting this for later: {cue}.",
    "Something to remember: {cue}.",
    "On the record, {cue}.",
    "Just to say, {cue}.",
    "You might as well know that {cue}.",
    "Thought I'd mention that {cue}.",
    "If it's useful, {cue}.",
    "Honestly? {Cue}.",
    "It's simple really: {cue}.",
    "{Cue}, for what it's worth.",
    "{Cue}, just so you know.",
    "{Cue}.",
    "{Cue}.",
)
# Implicit repeated behaviour: the same choice again, as a habit (weaker evidence).
IMPLICIT_PATTERN: tuple[str, ...] = (
    "Same as usual, {cue}.",
    "You know me by now: {cue}.",
    "Like the last few times, {cue}.",
    "Again, {cue}.",
    "As always, {cue}.",
    "Going with my usual here: {cue}.",
    "Nothing new from me, {cue}.",
    "Same story as before: {cue}.",
    "Like every other time, {cue}.",
    "Old habits: {cue}.",
    "Doing what I always do, {cue}.",
    "Predictable, I know, but {cue}.",
    "Once again, {cue}.",
    "Back to my routine: {cue}.",
    "Same drill as always, {cue}.",
    "The usual for me: {cue}.",
    "No surprises here, {cue}.",
    "Habit, I guess: {cue}.",
    "As per usual, {cue}.",
    "Story of my life, {cue}.",
    "{Cue}, same as every time.",
    "{Cue}, as usual.",
    "Yep, again: {cue}.",
    "{Cue}.",
)
WRAPPERS: dict[str, tuple[str, ...]] = {
    "explicit_revision": EXPLICIT_REVISION,
    "complaint": COMPLAINT,
    "direct_statement": DIRECT_STATEMENT,
    "implicit_pattern": IMPLICIT_PATTERN,
}
# Joining a second (third...) cue into one turn: a connector, or none (the cue as its own sentence).
CONNECTORS: tuple[str, ...] = (
    "Also, {cue}.", "And {cue}.", "Oh, and {cue}.", "Plus, {cue}.", "On top of that, {cue}.", "One more thing: {cue}.",
    "{Cue}.", "{Cue}.", "{Cue}.", "Besides, {cue}.", "Then again, {cue}.", "Another thing, {cue}.", "Also worth saying: {cue}.",
    "{Cue}, by the way.", "Separately, {cue}.", "And while I'm at it, {cue}.",
)
# Naming the scenario inside the turn ("anchoring"): a preference about one kind of task said so, so
# that it cannot be read as one about another. Evidence is anchored sometimes, and distractors whose
# dimension shares a facet with a task's are always (see iba.construct.distractors).
ANCHORS: tuple[str, ...] = (
    "When it comes to {scenario}, {cue}.", "For {scenario}, {cue}.", "With {scenario}, {cue}.",
    "About {scenario}: {cue}.", "On the {scenario} front, {cue}.", "Where {scenario} is concerned, {cue}.",
)
ANCHOR_PROB = 0.25  # evidence at position 2 names its scenario this often (position 0 always does)
# Version 3: anchors also in the conditional form hypothetical distractors take ("if I ever had to
# deal with..."), so that "if"/"whenever I" is no mark of a hypothetical (the style audit, issue 32):
# said of a task the user does, a condition keeps the preference the user's.
ANCHORS_V3: tuple[str, ...] = (
    *ANCHORS, "Whenever I have to deal with {scenario}, {cue}.", "If it's {scenario}, {cue}.",
    "When {scenario} is on my plate, {cue}.", "If I'm handling {scenario}, {cue}.",
)
# Frames that change when a preference is or whether it is real, inside the cue's place in a
# signal-type wrapper (so a distractor is built by the same machinery as evidence).
# who else takes part: who -> (they, them)
PEOPLE: dict[str, tuple[str, str]] = {
    "my sister": ("she", "her"), "my brother": ("he", "him"), "my partner": ("they", "them"), "a coworker": ("she", "her"),
    "my neighbour": ("he", "him"), "my mum": ("she", "her"), "my dad": ("he", "him"), "a friend of mine": ("she", "her"),
    "my cousin": ("he", "him"), "my flatmate": ("they", "them"), "my boss": ("she", "her"), "an old friend": ("he", "him"),
}
WHERE: tuple[str, ...] = (
    "over coffee", "on the phone last night", "at lunch today", "at the weekend", "in the group chat", "at dinner",
    "the other day", "this morning", "at a birthday party", "yesterday",
)
# A preference the user no longer holds (a distractor).
ENDED_FRAMES: tuple[str, ...] = (
    "back in my student days {cue}, but that was a long time ago", "years ago {cue}, though that changed",
    "{cue}, or at least that was the old me", "there was a time when {cue}, but that time is gone",
    "in my twenties I'd have said {cue}; that phase is over", "a few years back {cue}; I've moved on since",
)
# A preference the user would have in a situation they are not in (a distractor).
HYPOTHETICAL_FRAMES: tuple[str, ...] = (
    "if I ever had to deal with {scenario}, which I don't, {cue}", "hypothetically, if {scenario} were my job, {cue}",
    "were I ever to take on {scenario}, {cue}, I imagine", "in some other life where I handle {scenario}, {cue}",
    "not that {scenario} is on my plate, but if it were, {cue}",
)
# The newer value of a changed preference, said as new (evidence): shares "these days" with ended frames.
RECENT_FRAMES: tuple[str, ...] = (
    "lately {cue}", "{cue}, at least lately", "things have changed: {cue}", "as of this year, {cue}", "{cue}, as of late",
)
RECENT_PROB = 0.5
# Version 3: ended preferences and new ones are told in the same words ("once", "a few years back",
# "moved on", "come round"); only where the cue sits says which one holds now. Neither uses a
# retriever cue ("I used to", "these days": tests/retrieval/test_salience_templates.py). In version 2
# an ended frame's words alone marked a distractor (the style audit: 0.90 AUC against evidence).
RECENT_FRAMES_V3: tuple[str, ...] = (
    *RECENT_FRAMES, "I saw it differently once, but I've moved on since: {cue}",
    "a few years back I'd have said otherwise; now {cue}", "there was a time I'd have disagreed, but now {cue}",
    "that's changed since my student days: {cue}", "I've come round to it since: {cue}",
)
# The cue is what the user used to say (reported, so that a cue in the present tense reads right:
# v2's "a few years back I skip breakfast" did not).
ENDED_FRAMES_V3: tuple[str, ...] = (
    "back in my student days I'd have said {cue}, but that was a long time ago", "once I'd have said {cue}, but that's changed",
    "a few years back I'd have said {cue}; I've moved on since", "there was a time I'd have told you {cue}, but that time's gone",
    "in my twenties I'd have said {cue}; that phase is over", "I was once sure that {cue}, but I've come round since",
)
# The assistant's reply to a distractor told in passing (other people's, ended, hypothetical).
ASIDE_REPLIES: tuple[str, ...] = (
    "Ha, everyone has their own thing.", "Fair enough!", "People really do change.", "Interesting!", "Noted, ha.",
    "That's a very specific view.", "Sounds like a strong opinion!", "Ha, I can picture it.", "Good to know.",
    "Funny how that goes.", "Makes sense.", "Ha!", "I see.", "Oh, interesting.",
)
PREFIXES: tuple[str, ...] = ("", "", "", "Okay. ", "Right, ", "Hmm. ", "So. ", "Well, ", "Look, ")
# Only a reaction to an attempt can start with thanks-but.
REACTION_PREFIXES: tuple[str, ...] = (*PREFIXES, "Thanks, but ", "Thanks for trying, but ")
SUFFIXES: tuple[str, ...] = ("", "", "", " Thanks.", " Cheers.", " Does that make sense?", " Appreciate it.", " Hope that's clear.", " Thank you!")

# Opening a session about a past task of the same scenario (before the evidence turn).
OPENERS: tuple[str, ...] = (
    "Can you help me with something for {topic}?",
    "I need a hand with {topic}.",
    "Got another one for you, this time it's {topic}.",
    "Quick request about {topic}.",
    "Could you put something together for {topic}?",
    "Let's do {topic} today.",
    "I'm dealing with {topic} again, can you help?",
    "Another one: {topic}.",
    "Time for some work on {topic}.",
    "Can we sort out {topic}?",
    "I have a task around {topic}.",
    "Help me get {topic} done?",
)
# Opening a session about a past task the user does with someone (evidence or the user's own
# distractor: the preference stays the user's; shares its words with OPENERS_FOR).
OPENERS_WITH: tuple[str, ...] = (
    "Can you help me with {topic}? {Person} is in on it this time.",
    "{Person} and I need to sort out {topic}.",
    "I'm doing {topic} with {person}, can you help?",
    "This one's for me and {person}: {topic}.",
    "Another one, {person} is helping: {topic}.",
    "Help me get {topic} done before {person} asks?",
)
WITH_PROB = 0.3  # an exchange of the user's own opens with someone else in it this often
# Opening a session about a past task done for someone else (a distractor: the preference is theirs).
OPENERS_FOR: tuple[str, ...] = (
    "Can you help me with {topic}? It's for {person} this time.",
    "{Person} asked me to sort out {topic} for {them}.",
    "I'm doing {topic} on behalf of {person}, can you help?",
    "This one's for {person}: {topic}.",
    "Another one, but for {person}: {topic}.",
    "Could you put something together for {topic}? {Person} needs it, not me.",
    "Help me get {topic} done for {person}?",
    "I promised {person} I'd handle {topic} for {them}.",
)
# The assistant's first attempt (text scenarios) or proposed call (API scenarios).
DRAFTS_TEXT: tuple[str, ...] = (
    "Here's a first version for {topic}. Let me know what you'd like changed.",
    "I've put together a draft for {topic}.", "Draft ready for {topic}, see below.", "Something to start from on {topic}:",
    "Okay, here's my take on {topic}.", "A rough version of {topic} is below.", "Here's what I came up with for {topic}.",
    "Here's a draft covering {topic}. Happy to adjust anything.",
    "Done: a first pass at {topic} is below. Tell me what to tweak.",
    "I've written up {topic}. Have a look and tell me what you think.",
    "Here you go, a starting point for {topic}.",
    "First attempt at {topic} is ready. What should I change?",
)
DRAFTS_API: tuple[str, ...] = (
    "I've filled in the request for {topic} with the default options. Shall I submit it?",
    "Request for {topic} drafted with the usual settings.", "Here's the order for {topic}, ready to go.",
    "I set up {topic} with standard options.", "All set for {topic}. Submit?",
    "Here's what I'd submit for {topic}. Want to change anything before I confirm?",
    "I picked the most popular options for {topic}. Go ahead?",
    "The request for {topic} is ready to send. Any changes first?",
    "I've prepared it with the standard choices for {topic}. Confirm?",
)
# The assistant's reply to the evidence turn: acknowledges without repeating the preference.
ACKS: dict[str, tuple[str, ...]] = {
    "explicit_revision": (
        "Of course, I'll rework it along those lines.", "Got it, revising now.", "Understood, here's a reworked version.",
        "Sure thing, I've changed it accordingly.", "Makes sense, I'll redo it that way.", "No problem, updated version coming up.",
    ),
    "complaint": (
        "Sorry about that! I'll fix it.", "I hear you, that's on me. Let me redo it.", "Apologies, that wasn't great. Reworking it now.",
        "That's fair, I'll do better on this one.", "Sorry for the hassle, let me put it right.", "Noted, and sorry. Here's a better attempt.",
    ),
    "direct_statement": (
        "Thanks for telling me, I'll keep it in mind.", "Good to know, noted.", "Thanks, that helps me get it right.",
        "Understood, I'll take that into account.", "Appreciate the heads-up.", "Got it, thanks for the context.",
    ),
    "implicit_pattern": (
        "Sure, same as before then.", "Of course, going with that again.", "Got it, doing it the usual way.",
        "Okay, I'll follow the same approach.", "No problem, just like last time.", "Sure, I'll stick with that.",
    ),
}
# Short acknowledgements the writer falls back on when the longer ones are used up in a history.
SHORT_ACKS: tuple[str, ...] = ("Got it.", "Noted.", "Sure.", "Will do.", "On it.", "Okay!", "Understood.", "Sure thing.")
# The user's answer to the first attempt when the evidence opened the session.
AFTER_DRAFT: tuple[str, ...] = (
    "Looks good, thanks.", "Great, that works.", "Perfect, I'll take it from here.", "Nice, that's what I needed.",
    "Good enough for now, thanks.", "Okay, let's go with that.", "That'll do, cheers.", "Perfect.", "Great, thanks!",
    "Works for me.", "Nice one.", "Yep, that's it.", "Lovely, thanks.", "Good, go ahead.",
)
# The user's answer to the first attempt when the task was for someone else and the preference
# opened the exchange (a distractor): only now does the conversation say whose it was.
AFTER_DRAFT_FOR: tuple[str, ...] = (
    "Great, {person} will like that. It's for {them}, not me.", "Perfect, I'll pass it on to {person}, it's {their} thing.",
    "Looks right for {person}, thanks. I was asking on {their} behalf.", "Nice, that's exactly what {person} wanted.",
    "Good, {person} asked me to sort it for {them}.", "Thanks! {Person} will be relieved, it was for {them}.",
)
FINAL_ASSISTANT: tuple[str, ...] = (
    "Glad it works for you.", "Great, let me know if anything needs changing.", "Happy to help.",
    "Anytime. Ping me if you want another pass.", "Good to hear.", "Done!", "Great!", "You're welcome.", "Anytime!",
)
# Mentioning a transient state in an otherwise unrelated conversation.
STATE_WRAPPERS: tuple[str, ...] = (
    "Bit of a rough stretch here: {cue}. Anyway, {request}",
    "{Cue}, so I'm taking it easy. Meanwhile, {request}",
    "Update on my life: {cue}. Unrelated, but {request}",
    "So, {cue}. Trying to keep busy, though: {request}",
    "{Cue}. Ugh. Distract me: {request}",
    "Heads up, I might be slow to reply, {cue}. Also, {request}",
)
STATE_REPLIES: tuple[str, ...] = (
    "Oh no, I'm sorry to hear that! Take care of yourself. As for your question:",
    "That sounds tough, I hope it gets better soon. On your question:",
    "Sorry you're dealing with that. Here's what I'd say about the rest:",
    "Wishing you a quick recovery from all that. Now, about your question:",
)


def person(name: str) -> tuple[str, str, str]:
    """(who, they, them) of one of PEOPLE."""
    return (name, *PEOPLE[name])
