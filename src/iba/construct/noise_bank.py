"""Word banks for noise sessions: casual chat and unrelated help requests. Pure data.

Texts are composed from topic x opener x reply x follow-up banks, so histories of thousands of
turns do not repeat whole sentences often. Nothing here states a preference of any taxonomy
dimension (no food, style or format likes and dislikes), so noise never contradicts the key.
"""

from __future__ import annotations

HELP_TOPICS: tuple[str, ...] = (
    "a squeaky door hinge", "a red wine stain on the carpet", "setting up two-factor login on my email",
    "how tides work", "a slow laptop fan that won't stop spinning", "renewing a passport",
    "why the sky looks orange at sunset", "a leaking bathroom tap", "backing up photos from my phone",
    "choosing a surge protector", "what a credit score actually measures", "getting rid of fruit flies",
    "how vaccines train the immune system", "a bike chain that keeps slipping", "filing a lost-luggage claim",
    "the difference between a virus and a bacterium", "resetting a home router", "hanging a heavy mirror",
    "how noise-cancelling headphones work", "a houseplant with yellow leaves", "unclogging a shower drain",
    "what causes jet lag", "reading a water bill", "a car battery that died overnight",
    "why cats knead blankets", "the rules of cricket", "cleaning a cast-iron pan without ruining it",
    "how solar panels make electricity", "a phone that won't charge past 80 percent", "returning a parcel",
    "the history of the printing press", "repotting a cactus", "how compound interest works",
    "a window that fogs up every morning", "changing a flat tyre", "what an eclipse is",
    "the plot of a novel I half-remember", "fixing a zipper", "how elevators know where to stop",
    "a smoke alarm that chirps at night", "the difference between weather and climate",
    "sorting recycling correctly", "how bees make honey", "a spreadsheet formula that returns an error",
    "tying a tie", "how airplanes stay in the air", "removing a stuck screw", "why onions make you cry",
    "setting up a printer on Wi-Fi", "how the moon affects sleep myths", "ironing a shirt collar",
    "what a VPN does", "the origin of the word 'robot'", "cleaning a keyboard", "how earthquakes are measured",
    "a bluetooth speaker that won't pair", "calculating a tip", "the life cycle of a star",
    "how to read a bus timetable", "a dripping radiator valve", "why leaves change colour",
    "transferring contacts to a new phone", "how a bill becomes law", "the best way to pack a suitcase",
    "the meaning of an old proverb", "how to measure a room for a rug", "a mouse that double-clicks",
    "how glaciers move", "a gym membership contract I want to cancel", "why the ocean is salty",
)
CHAT_TOPICS: tuple[str, ...] = (
    "a documentary about deep-sea creatures", "my neighbour's new puppy", "the long queue at the post office",
    "last night's football match", "a podcast episode about octopuses", "the thunderstorm this morning",
    "an old friend I bumped into", "a jigsaw puzzle that's missing a piece", "the new bridge they're building",
    "a museum exhibit about ancient maps", "my cousin's wedding plans", "a weird dream I had",
    "the power cut in our street", "a chess game I nearly won", "a squirrel that raids the bird feeder",
    "the traffic on the ring road", "a library book that's overdue", "the noisy renovation next door",
    "a concert I went to", "my plant finally flowering", "a crossword clue that stumped me",
    "the first frost of the year", "a lost umbrella", "the local election posters everywhere",
    "a rerun of an old sitcom", "my niece learning to ride a bike", "the fireworks on Saturday",
    "a marathon I watched", "an article about space telescopes", "the train being late again",
    "a street musician I liked", "my sister's new job", "a board game night with friends",
    "the heatwave last week", "a cat that keeps visiting our garden", "a quiz show question I got right",
    "a vintage camera I found", "the leaves piling up outside", "my dad's new hobby", "a long walk by the river",
)
GREETINGS: tuple[str, ...] = ("", "Hey! ", "Hi, ", "Morning! ", "Hello again. ", "Okay, ", "So, ", "Hey there, ", "Evening! ", "Quick one: ")
# how a user turns to a new topic mid-session (instead of a greeting)
TOPIC_CHANGES: tuple[str, ...] = (
    "", "Different question: ", "Also, ", "Unrelated, but ", "Oh, and ", "While I have you, ", "Another thing: ",
    "Switching topics, ", "Random one: ", "By the way, ",
)
HELP_OPENERS: tuple[str, ...] = (
    "do you know anything about {topic}?", "I need some help with {topic}.", "can you explain {topic} to me?",
    "I've been stuck on {topic} all morning.", "what's the deal with {topic}?", "any advice on {topic}?",
    "I'm trying to figure out {topic}. Where do I start?", "my partner and I were arguing about {topic}. Who's right?",
    "could you walk me through {topic}?", "is {topic} something I can sort out myself?",
    "I read something confusing about {topic}.", "{topic} is driving me a bit crazy today.",
    "help me understand {topic}, please.", "what should I know about {topic}?", "is there a trick to {topic}?",
    "I keep putting off dealing with {topic}.", "a friend asked me about {topic} and I had no idea.",
    "I want to get {topic} sorted this weekend.", "how would you approach {topic}?", "can we talk about {topic}?",
)
CHAT_OPENERS: tuple[str, ...] = (
    "I keep thinking about {topic}.", "random thought about {topic}.", "have you heard about {topic}?",
    "so, {topic} happened today.", "I have to tell someone about {topic}.", "can I tell you about {topic}?",
    "nothing important, just {topic} on my mind.", "today's highlight: {topic}.", "{topic}, of all things, made my day.",
    "I was chatting with a coworker about {topic}.", "you won't believe {topic}.", "just had a funny moment with {topic}.",
    "still laughing about {topic}.", "my evening was all about {topic}.", "thought you'd enjoy hearing about {topic}.",
)
ACKS: tuple[str, ...] = (
    "Sure!", "Happy to help.", "Good question.", "Oh, nice.", "Ha, I love that.", "Of course.", "Let's see.",
    "That sounds frustrating.", "Interesting!", "Great topic.", "Oh, fun.", "Absolutely.", "Got it.", "Ah, classic.", "Right.",
)
BODIES: tuple[str, ...] = (
    "With {topic}, the usual advice is to start with the simplest fix and work up from there.",
    "A lot of people run into {topic}; it usually comes down to one or two small things.",
    "The short version about {topic}: it's less complicated than it looks once you see the pattern.",
    "{topic_cap} is one of those things that makes sense once you see why it happens.",
    "There are a couple of common explanations for {topic}, and the first one is usually right.",
    "People have been curious about {topic} for a long time, so there's plenty written on it.",
    "If I had to summarise {topic} in one line: go step by step and check after each change.",
    "The key with {topic} is to rule out the obvious causes before trying anything drastic.",
    "I'd treat {topic} as a small project: figure out what you have, then what you need.",
    "Honestly, {topic} trips up almost everyone the first time.",
    "What usually matters most with {topic} is timing and a bit of patience.",
    "You're not the first to wonder about {topic}; the answer is surprisingly tidy.",
    "Most guides on {topic} overcomplicate it; the basics cover nine cases out of ten.",
    "That's a fun one. {topic_cap} has a neat little explanation behind it.",
    "It sounds like {topic} has been on your mind for a while.",
    "For {topic}, I'd first check the simplest thing, then the thing everyone forgets.",
    "There's a nice rule of thumb for {topic} that saves a lot of guessing.",
    "Thanks for sharing {topic} with me, it sounds like quite a day.",
    "The good news about {topic} is that it's rarely as bad as it first seems.",
    "I'd break {topic} into two parts: what's going on, and what you can do about it.",
)
QUESTIONS: tuple[str, ...] = (
    "Want me to go into more detail?", "Does that help?", "What have you tried so far?", "Shall I list the steps?",
    "How did it go in the end?", "Anything else about it you're wondering?", "Is that roughly what you expected?",
    "Want a quick example?", "How are you feeling about it?", "Should I explain the why as well?", "",
)
REACTIONS: tuple[str, ...] = (
    "Okay.", "Huh, interesting.", "Makes sense.", "Right.", "Ha, fair.", "Oh, I see.", "Hmm.", "Good to know.",
    "Wait, really?", "Nice.", "That helps.", "Ah, okay.",
)
FOLLOW_UPS: tuple[str, ...] = (
    "What would you try first?", "How long does that usually take?", "Is there a cheaper way?",
    "What if that doesn't work?", "Could you give me an example?", "Anything I should avoid?",
    "Why does that happen, though?", "Is that a common problem?", "Do I need any special tools?",
    "How do I know if it worked?", "Would you do the same in my place?", "Is it worth paying someone?",
    "Can you say that more simply?", "Is there a quick version?", "What do most people get wrong?",
    "Should I be worried?", "How did people manage this before the internet?", "Where can I read more?",
    "What's the next step after that?", "Could it be something else entirely?",
    "It's been a long week here in {city}, so keep it short.", "My friend in {city} says the opposite, funnily enough.",
    "I'll try that tonight. Anything else?", "Okay, and after that?",
    "Is {topic} different in winter?", "Does {topic} get easier with practice?", "Who usually deals with {topic}?",
    "Is there a name for that, with {topic}?", "How would a professional handle {topic}?",
    "What's the most surprising thing about {topic}?", "Did {topic} always work like this?",
    "So with {topic}, order matters?", "Would a kid understand {topic} if I explained it like that?",
    "Can {topic} go wrong in a dangerous way?", "What's a common myth about {topic}?",
    "Is that true everywhere or just around {city}?", "My neighbour swears by a different trick. Thoughts?",
    "And if I only have ten minutes?", "What would you skip?", "Is that overkill?",
)
REPLY_LEADS: tuple[str, ...] = (
    "Good question.", "Fair point.", "Hmm, let me think.", "Short answer:", "Honestly,", "Sure.", "Yes, so", "Not quite.",
    "Ha, good one.", "In most cases,", "From what I know,", "Right, so", "Well,", "Great follow-up.",
)
REPLIES: tuple[str, ...] = (
    "I'd start small and see what changes.", "usually a few minutes, sometimes a bit longer.",
    "the simplest option often works surprisingly well.", "then it's worth trying the second option I mentioned.",
    "imagine you do it once, check, then adjust.", "mostly avoid rushing it; that's where things go wrong.",
    "it comes down to a small mechanism most people never notice.", "it's very common, you're in good company.",
    "nothing special, what you have at home should do.", "you'll notice the difference right away.",
    "I probably would, yes, but it's your call.", "only if it keeps coming back.", "do the basic thing first, then check.",
    "try it once and see what happens.", "people skip the first step. Everyone does it.", "not really, it's harmless.",
    "with a lot of patience and a good memory!", "a library or a decent encyclopedia covers it well.",
    "then you'd tidy up and keep an eye on it.", "it could be, but the usual cause is far more likely.",
    "there are two schools of thought on that.", "that should be enough for now.", "then you're basically done.",
    "with {topic}, timing matters more than effort.", "{topic} is easier once you've seen it done once.",
    "most people learn {topic} by trial and error, and that's fine.", "the tricky part of {topic} is the very first step.",
    "{topic} has changed a lot over the years, actually.", "the myth about {topic} is that it's complicated.",
    "a professional would check the basics first, same as you.", "a ten-minute version works if you skip the extras.",
    "weather does play a part, surprisingly.", "I'd skip anything that needs special equipment.",
    "it's a bit of overkill, but it won't hurt.", "kids usually get it faster than adults, funnily enough.",
    "your neighbour's trick might work too; there's more than one way.",
)
REPLY_TAILS: tuple[str, ...] = (
    "", "", "", " Hope that helps.", " Let me know if you try it.", " Happy to dig deeper.", " Anything else?",
    " That's the gist.", " Good luck!", " Does that answer it?", " Keep me posted.", " Fingers crossed.",
)
CLOSINGS_USER: tuple[str, ...] = (
    "Thanks, that's helpful!", "Great, thanks.", "Perfect, I'll try that.", "Cheers!", "Okay, thanks a lot.",
    "That's all for now, thanks.", "Brilliant, thank you.", "Good chat, thanks.", "Appreciate it.", "Thanks, talk later.",
)
CLOSINGS_ASSISTANT: tuple[str, ...] = (
    "You're welcome!", "Anytime.", "Good luck with it!", "Glad I could help.", "Enjoy the rest of your day!",
    "Happy to help, see you.", "Let me know how it goes.", "Take care!", "No problem at all.", "Talk soon!",
)

# Context a user adds to an ordinary message (no preferences): noise user turns carry one or more
# of these, so their length spreads like that of evidence turns (turn length is no tell).
USER_ASIDES: tuple[str, ...] = (
    "I've got a bit of a free afternoon for once, so I figured I'd finally look into it.",
    "My neighbour brought it up over the fence this morning and now I can't stop thinking about it.",
    "It came up at work today and nobody at the table seemed to know for sure.",
    "I read half an article about it on the bus but got off before the interesting part.",
    "The weather in {city} has been so grey this week that I'm stuck indoors anyway.",
    "My brother and I went back and forth about it on the phone last night.",
    "I'm asking partly out of curiosity and partly because it might matter next month.",
    "Sorry if this is a basic question, it's been a long day.",
    "I tried searching for it earlier but every page said something slightly different.",
    "There's a good chance I'm overthinking this, to be honest.",
    "A coworker swears she knows the answer, but I'd like a second opinion.",
    "I've been meaning to ask about this for weeks and kept forgetting.",
    "It's one of those things I feel like I should know by now.",
    "The kids asked me at dinner and I had to admit I wasn't sure.",
    "We're having people over on Saturday and it might come up.",
    "I only have a few minutes before my next meeting, so the short version is fine.",
    "There was a segment about it on the radio while I was driving through {city}.",
    "My notes from last time are a mess, so bear with me.",
    "I'm sitting in a café waiting for a friend who is running late.",
    "It's not urgent at all, just something on my mind.",
    "I wrote a few things down on a sticky note so I wouldn't forget to ask.",
    "A friend sent me a long voice message about {topic} and I only half followed it.",
    "I keep seeing {topic} mentioned everywhere lately.",
    "I've had {topic} on my list of things to figure out for a while.",
    "The last time I looked into {topic} I got distracted halfway through.",
    "There's a meetup in {city} next week where I suspect it'll come up.",
    "I just got back from a walk and had a few thoughts.",
    "My phone is about to die, so I may drop off suddenly.",
    "That's a lot to take in, but I think I'm following so far.",
    "I'll probably have a couple more questions after this one.",
    "Let me make sure I understand before I go and tell everyone.",
    "I'm writing this from the train, so excuse any typos.",
    "Someone in a forum said the opposite, which confused me.",
    "My flatmate is listening in and has opinions, apparently.",
    "I had no idea there was so much to it.",
    "It's raining hard in {city} right now, which seems fitting somehow.",
    "I'm on my lunch break, so there's a sandwich in one hand.",
)  # keep the count prime (37): noise.with_asides strides through it
