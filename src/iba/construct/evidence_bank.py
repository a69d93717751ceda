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
)
WRAPPERS: dict[str, tuple[str, ...]] = {
    "explicit_revision": EXPLICIT_REVISION,
    "complaint": COMPLAINT,
    "direct_statement": DIRECT_STATEMENT,
    "implicit_pattern": IMPLICIT_PATTERN,
}
# Joining a second (third...) cue into one turn.
CONNECTORS: tuple[str, ...] = ("Also, {cue}.", "And {cue}.", "Oh, and {cue}.", "Plus, {cue}.", "On top of that, {cue}.", "One more thing: {cue}.")
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
    "Another {scenario} job: {topic}.",
    "Time for some {scenario} work on {topic}.",
    "Can we sort out {topic}?",
    "I have a {scenario} task around {topic}.",
    "Help me get {topic} done?",
)
# The assistant's first attempt (text scenarios) or proposed call (API scenarios).
DRAFTS_TEXT: tuple[str, ...] = (
    "Here's a first version for {topic}. Let me know what you'd like changed.",
    "Here's a draft covering {topic}. Happy to adjust anything.",
    "Done: a first pass at {topic} is below. Tell me what to tweak.",
    "I've written up {topic}. Have a look and tell me what you think.",
    "Here you go, a starting point for {topic}.",
    "First attempt at {topic} is ready. What should I change?",
)
DRAFTS_API: tuple[str, ...] = (
    "I've filled in the request for {topic} with the default options. Shall I submit it?",
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
# The user's answer to the first attempt when the evidence opened the session.
AFTER_DRAFT: tuple[str, ...] = (
    "Looks good, thanks.", "Great, that works.", "Perfect, I'll take it from here.", "Nice, that's what I needed.",
    "Good enough for now, thanks.", "Okay, let's go with that.", "That'll do, cheers.",
)
FINAL_ASSISTANT: tuple[str, ...] = (
    "Glad it works for you.", "Great, let me know if anything needs changing.", "Happy to help.",
    "Anytime. Ping me if you want another pass.", "Good to hear.",
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
