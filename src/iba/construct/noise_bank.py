"""Word banks for noise sessions, beside the topics with content (iba.construct.noise_topics). Pure data.

What is here is the glue of a conversation: greetings, changes of topic, short reactions, generic
openers and follow-ups that take a topic, closings, and a small grammar of asides (context a user
adds to a message: what happened today, where they are typing from). The content of a noise session
(what the user tells and asks, what the assistant explains) comes from the topic bank. Nothing here
states a preference, nor a fact about the user that bears on one (no pets, diet, health, vehicles,
housing, devices, schedules), so noise never contradicts the answer key.
"""

from __future__ import annotations

GREETINGS: tuple[str, ...] = ("", "", "Hey! ", "Hi, ", "Morning! ", "Hello again. ", "Okay, ", "So, ", "Hey there, ", "Evening! ", "Quick one: ", "Hi again! ")
# how a user turns to a new topic mid-session (instead of a greeting)
TOPIC_CHANGES: tuple[str, ...] = (
    "", "Different question: ", "Also, ", "Unrelated, but ", "Oh, and ", "While I have you, ", "Another thing: ",
    "Switching topics, ", "Random one: ", "Totally different subject: ", "Something else: ",
)
# generic openers that take a topic's noun phrase (beside each topic's own openers)
HELP_OPENERS: tuple[str, ...] = (
    "do you know anything about {topic}?", "I need some help with {topic}.", "can you explain {topic} to me?",
    "I've been stuck on {topic} all morning.", "what's the deal with {topic}?", "any advice on {topic}?",
    "I'm trying to figure out {topic}. Where do I start?", "could you walk me through {topic}?",
    "is {topic} something I can sort out myself?", "I read something confusing about {topic}.",
    "help me understand {topic}, please.", "what should I know about {topic}?", "is there a trick to {topic}?",
    "a friend asked me about {topic} and I had no idea.", "how would you approach {topic}?",
)
CHAT_OPENERS: tuple[str, ...] = (
    "I keep thinking about {topic}.", "random thought about {topic}.", "can I tell you about {topic}?",
    "I have to tell someone about {topic}.", "nothing important, just {topic} on my mind.", "today's highlight: {topic}.",
    "I was chatting with a coworker about {topic}.", "still laughing about {topic}.", "thought you'd enjoy hearing about {topic}.",
)
ACKS: tuple[str, ...] = (
    "Sure!", "Happy to help.", "Good question.", "Oh, nice.", "Ha, I love that.", "Of course.", "Let's see.",
    "Interesting!", "Great topic.", "Oh, fun.", "Absolutely.", "Got it.", "Ah, classic.", "Right.", "Okay!", "Oh wow.",
)
# short questions an assistant may end on (all short: they recur freely)
QUESTIONS: tuple[str, ...] = (
    "Does that help?", "Want more detail?", "What have you tried?", "Shall I list the steps?", "How did it go?",
    "Want an example?", "Make sense?", "Anything else?", "", "", "", "",
)
REACTIONS: tuple[str, ...] = (
    "Okay.", "Huh, interesting.", "Makes sense.", "Right.", "Ha, fair.", "Oh, I see.", "Hmm.", "Good to know.",
    "Wait, really?", "Nice.", "That helps.", "Ah, okay.", "Oh!", "Huh.", "Got it.", "Wow.", "Ha!", "I see.",
)
# generic follow-ups that take a topic (beside each topic's own questions)
FOLLOW_UPS: tuple[str, ...] = (
    "Is {topic} different in winter?", "Does {topic} get easier with practice?", "Who usually deals with {topic}?",
    "How would a professional handle {topic}?", "What's the most surprising thing about {topic}?",
    "Did {topic} always work like this?", "What's a common myth about {topic}?", "Can {topic} go wrong in a dangerous way?",
    "Is there a name for that, with {topic}?", "So with {topic}, order matters?",
)
SHORT_FOLLOW_UPS: tuple[str, ...] = (
    "Why, though?", "Is that common?", "And then?", "Really?", "How come?", "Any tools needed?", "How long?",
    "Cheaper way?", "What next?", "Is that risky?", "Worth it?", "Example?", "Where'd you read that?",
)
REPLY_LEADS: tuple[str, ...] = (
    "Good question.", "Fair point.", "Short answer:", "Sure.", "Not quite.", "Ha, good one.", "In most cases,",
    "From what I know,", "Right, so", "Well,", "Yes, and", "Partly.", "True.", "So,", "",
)
CLOSINGS_USER: tuple[str, ...] = (
    "Thanks, that's helpful!", "Great, thanks.", "Perfect, I'll try that.", "Cheers!", "Okay, thanks a lot.",
    "That's all for now.", "Brilliant, thank you.", "Good chat, thanks.", "Appreciate it.", "Thanks, talk later.",
)
CLOSINGS_ASSISTANT: tuple[str, ...] = (
    "You're welcome!", "Anytime.", "Good luck with it!", "Glad I could help.", "Enjoy your day!",
    "Happy to help, see you.", "Let me know how it goes.", "Take care!", "No problem at all.", "Talk soon!",
)
# Short replies the writer falls back on when every longer option is used up in this history.
FALLBACK_USER: tuple[str, ...] = ("Okay, next question.", "Right, go on.", "Fair enough.", "Okay, and?", "Got it, thanks.")
FALLBACK_ASSISTANT: tuple[str, ...] = ("Good question!", "Happy to explain.", "Sure, here goes.", "That's a fair ask.")

# ---------------------------------------------------------------------- asides
# A small grammar of context a user adds to a message. Each template's slots multiply into hundreds of
# distinct sentences, so with the sentence budget an aside recurs at most a few times per history.
# `{city}` is the persona's city. Nothing here touches a preference or a fact that bears on one.
ASIDE_TEMPLATES: tuple[str, ...] = (
    "{when}, {event}.",
    "{Person} {brought} it up {where}, which is why I'm asking.",
    "I'm typing this {place}, so {excuse}.",
    "It's {weather} in {city} {span}, {weather_so}.",
    "{Person} swears {claim}, and I'd like a second opinion.",
    "This is one of those things {knowing}.",
    "I looked it up {looked}, but {looked_but}.",
    "{when}, {event}, so my head's a bit all over the place.",
)
ASIDE_SLOTS: dict[str, tuple[str, ...]] = {
    "when": (
        "This morning", "Earlier today", "Last night", "On Sunday", "Yesterday afternoon", "Just now", "An hour ago",
        "Over the weekend", "On my lunch break", "Before dinner", "On Friday", "First thing today",
    ),
    "event": (
        "the fire alarm in our building went off for a drill", "a parcel for the neighbours ended up at my door",
        "I found an old birthday card in a drawer", "the printer at work jammed three times in a row",
        "a friend sent me photos from her cousin's wedding", "our street had its water switched off for repairs",
        "I finally returned a library book that was weeks overdue", "someone left a tray of pastries in the office kitchen",
        "the lift in our building broke down again", "I spent an hour on hold with a call centre",
        "a stranger asked me for directions in three languages", "the internet went down in the whole block",
        "I got roped into helping a coworker move boxes", "a marching band went past the window",
        "my phone decided to install updates at the worst moment", "I sorted through a pile of old receipts",
        "there was a surprise inspection at work", "I helped a neighbour carry a sofa up the stairs",
        "the power flickered off twice", "a crossword clue had me stumped for ages",
        "I dug out a box of old school photos", "someone knocked on the door selling raffle tickets",
        "a meeting ran forty minutes over", "I lost my keys and found them in the fridge",
    ),
    "Person": (
        "My brother", "A coworker", "My aunt", "An old classmate", "My neighbour", "A friend from school", "My cousin",
        "Someone at work", "My mum", "My dad", "A friend of a friend",
    ),
    "brought": ("brought", "kept bringing", "randomly brought", "casually brought"),
    "where": (
        "over coffee", "on the phone last night", "at lunch today", "in a text this morning", "at the weekend",
        "in the group chat", "while we were waiting in a queue", "at a birthday party",
    ),
    "place": (
        "from the kitchen table", "in a waiting room", "between two meetings", "on a park bench", "at the library",
        "in a very noisy cafe", "while the kettle boils", "in the queue at the post office",
    ),
    "excuse": ("excuse the typos", "I may be slow to answer", "this might be brief", "bear with me", "forgive the rambling"),
    "weather": ("pouring", "grey and windy", "unusually warm", "foggy", "freezing", "bright but chilly", "muggy", "drizzly"),
    "span": ("today", "this week", "again", "for the third day running", "this afternoon"),
    "weather_so": (
        "so I'm staying in", "which suits a slow day", "so no plans outside", "and the streets are quiet",
        "so I finally have time for this",
    ),
    "claim": (
        "the answer is obvious", "everyone gets this wrong", "there's a simple trick to it", "the opposite is true",
        "it's all explained in one old book", "it changed a few years ago",
    ),
    "knowing": (
        "I feel I should know by now", "nobody at work could answer", "that came up at dinner", "I keep forgetting",
        "that sound simple until you try to explain them", "I've wondered about for years",
    ),
    "looked": ("earlier", "last night", "during a break", "this morning", "a while ago"),
    "looked_but": (
        "every page said something slightly different", "the explanations went over my head",
        "I got distracted halfway through", "the top results were all adverts", "I only found forum arguments",
    ),
}
