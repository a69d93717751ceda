"""Generator v3's noise talk: exchanges where the assistant answers what the user said.

Generator v2 wrote a noise session from a topic's lists independently: the user asked one of the
topic's questions, the assistant stated a random fact of the same topic (an answer to another
question), connectors ran into capitalised sentences ("Well, Cooked food ..."), and user turns
carried up to three unrelated asides. Version 3 writes the same kind of session from the same data,
coherently:

- a question is answered by the fact the topic data pairs with it (`NoiseTopic.answers`, paired once
  by tools/pair_noise_answers.py); a question the data has no answer for gets a hedge and a related
  fact; a statement (a situation detail) gets an acknowledgement;
- a session keeps its topic across the stretches between its exchanges (`SessionTalk`): after an
  evidence or distractor exchange, the user goes back to it; a new topic comes only when the old one
  is spent in this history;
- fragments join without seams (`join`): a connector is followed by a lower-case word unless that
  word is "I" or a proper noun, and end marks are never doubled;
- a user turn carries at most one aside, in ASIDE_RATE of turns.

Everything goes through the history's sentence budget, as in v2.
"""

from __future__ import annotations

import random
import re
from functools import cache

from iba.construct import noise_bank as bank
from iba.construct.noise import Voice, aside
from iba.construct.noise_topics import NoiseTopic, load_noise_topics, other_topic, topics_by_id
from iba.construct.plan_types import NoiseSpec

ASIDE_RATE = 0.2  # share of user turns with an aside (one at most); one in five; v2: 80% of noise user turns had 1-3
# A user turn's length comes from what the user tells about the topic (its details), no longer from
# asides: noise user turns must run as long as preference turns (the tells' turn length, <= 0.6 AUC)
DETAIL_PROB = 0.9  # an opening user turn adds a situation detail
SECOND_DETAIL_PROB = 0.6  # ... and a second one (also a statement told: two details)
EXTRA_DETAIL_PROB = 0.9  # a follow-up question comes with a detail
SECOND_EXTRA_DETAIL_PROB = 0.45  # ... or two
THIRD_DETAIL_PROB = 0.3  # an opening turn, or one that only tells (no question), tells up to three
QUESTION_PROB = 0.7  # a follow-up is one of the topic's questions (else a detail, told)
TWO_QUESTIONS_PROB = 0.45  # ... and asks a second one
SECOND_FACT_PROB = 0.2  # an answer adds an unpaired fact of the topic
STATEMENT_FACT_PROB = 0.3  # an acknowledgement of a statement goes on with a fact of the topic
CLOSING_PROB = 0.15  # a session of 3 or more pairs ends on thanks (v2: 0.4)
CHECK_PROB = 0.2  # an answer ends on a short check ("Does that help?")

# how the assistant starts an answer to a question: a sentence of its own, or a connector that the
# answer continues in lower case
ANSWER_LEADS: tuple[str, ...] = (
    "", "", "", "Good question.", "Sure.", "Short answer:", "From what I know,", "Well,", "In most cases,",
    "As far as I know,", "Right, so", "Generally,", "Okay, so",
)
# how an answer turns to the second question of a turn
SECOND_ANSWER_LEADS: tuple[str, ...] = ("As for your other question,", "On the second point,", "And to your last question,", "As for the other thing,")
# an answer to a question the topic data has no answer for: a hedge, then a related fact
HEDGES: tuple[str, ...] = (
    "I'm not sure about that exactly, but", "I can't say for sure. What I do know is that",
    "Hard to say for sure. One related thing:", "I can't answer that precisely, though", "Not something I know well, but",
)
# how the assistant takes a statement (a situation detail)
STATEMENT_ACKS: tuple[str, ...] = (
    "Good to know.", "That helps.", "That narrows it down.", "Okay, noted.", "Thanks, useful context.",
    "I see.", "That makes sense.", "Right, useful detail.", "Ah, okay.", "Fair enough.",
)
# how the assistant takes an opening message
OPEN_ACKS: tuple[str, ...] = ("Sure!", "Happy to help.", "Good question.", "Of course.", "Let's see.", "Oh, fun.", "Absolutely.", "Okay!")
# (neutral: what the user tells may be good news or bad)
CHAT_ACKS: tuple[str, ...] = ("Oh, really?", "Interesting.", "Oh wow.", "Ah, I see.", "Huh.", "Oh, okay.", "That's quite a story.")
# short checks an answer may end on (all short: they recur freely)
CHECKS: tuple[str, ...] = ("Does that help?", "Want more detail?", "Make sense?", "Want an example?")
# the user's reaction to an answer before the next question
REACTIONS: tuple[str, ...] = (
    "Okay.", "Huh, interesting.", "Makes sense.", "Right.", "Oh, I see.", "Good to know.", "Wait, really?", "Nice.",
    "That helps.", "Ah, okay.", "Huh.", "Got it.", "I see.", "Hmm.", "Oh!", "",
)
# how the user goes back to the session's topic after an exchange about something else (every
# fixed phrase here is a short sentence, or the start of a longer one: the budget bounds only those)
RESUMES: tuple[str, ...] = (
    "Anyway, back to that. ", "Going back to earlier: ", "Anyway, ", "Back to the other thing: ",
    "One more on that earlier topic: ", "Also, about what I asked before: ",
)
USER_FALLBACK: tuple[str, ...] = ("Okay, thanks.", "Got it, thanks.", "Fair enough.", "Right, makes sense.")
ASSISTANT_FALLBACK: tuple[str, ...] = ("Anytime.", "Glad that helps.", "Sure thing.", "Happy to help.")

_WORD = re.compile(r"[A-Za-z][a-z]*")
_FIRST = re.compile(r"[A-Za-z][A-Za-z'\-]*")
_MARKS = ".!?,;:"


@cache
def lower_words() -> frozenset[str]:
    """Words the topic bank and the word banks write in lower case somewhere: a capitalised one that
    is not among them is taken for a proper noun (kept capitalised after a connector). A rare common
    word the banks only ever capitalise is kept too ("Also, Commercial ovens"): a seam the
    coherence measure cannot see either, as it uses the same vocabulary."""
    from iba.construct import evidence_bank

    texts = [s for t in load_noise_topics() for s in (*t.openers, *t.details, *t.questions, *t.facts)]
    for module in (bank, evidence_bank):  # the word banks' strings too (a wider vocabulary)
        for value in vars(module).values():
            if isinstance(value, dict):
                value = [x for v in value.values() for x in (v if isinstance(v, (tuple, list)) else [v])]
            if isinstance(value, (tuple, list)):
                texts += [x for x in value if isinstance(x, str)]
    return frozenset(w for text in texts for w in _WORD.findall(text) if w.islower())


def starts_proper(text: str) -> bool:
    """Whether `text` starts with "I" or a word that keeps its capital mid-sentence (a proper noun,
    an acronym)."""
    m = _FIRST.match(text)
    if not m:
        return False
    word = m.group(0)
    if word == "I" or word.startswith("I'") or any(c.isupper() for c in word[1:]):
        return True
    return word[:1].isupper() and word.split("'")[0].lower() not in lower_words()


def join(lead: str, text: str) -> str:
    """`lead` and `text` as one message: after an end mark (or nothing) `text` starts with a capital,
    after a connector in lower case unless it starts with "I" or a proper noun; one space between."""
    lead = lead.strip()
    text = text.strip()
    if lead.endswith(tuple(_MARKS)):  # one mark where the two meet ("Okay." + ". Then" is "Okay. Then")
        text = text.lstrip(_MARKS + " ")
    if not lead:
        return text[:1].upper() + text[1:]
    if not text:
        return lead
    if lead.endswith((".", "!", "?", ":")):
        out = f"{lead} {text[:1].upper()}{text[1:]}"
    else:
        out = f"{lead} {text if starts_proper(text) else text[:1].lower() + text[1:]}"
    return out


def with_aside(rng: random.Random, voice: Voice, text: str) -> str:
    """A user turn with one context sentence before or after it in ASIDE_RATE of turns."""
    if rng.random() >= ASIDE_RATE:
        return text
    extra = aside(rng, voice)
    if not extra:
        return text
    return f"{text} {extra}" if rng.random() < 0.6 else f"{extra} {text}"


class SessionTalk:
    """A session's topic as the session uses it: which openers, questions (with their answers),
    details and facts are left, each used at most once per session and only while the history's
    budget allows."""

    def __init__(self, rng: random.Random, topic: NoiseTopic) -> None:
        self.switch(rng, topic)

    def switch(self, rng: random.Random, topic: NoiseTopic) -> None:
        """Talk about `topic` from now on (nothing of it used yet)."""
        self.topic = topic
        n_q, n_o = len(topic.questions), len(topic.openers)
        answers = topic.answers or [-1] * n_q
        opener_answers = topic.opener_answers or [-1] * n_o
        self.questions = [(topic.questions[i], answers[i]) for i in rng.sample(range(n_q), n_q)]
        self.openers = [(topic.openers[i], opener_answers[i]) for i in rng.sample(range(n_o), n_o)]
        self.details = rng.sample(topic.details, len(topic.details))
        self.facts_left = set(range(len(topic.facts)))
        self.started = False
        # facts no question or opener asks for: what a hedge, a second fact or a generic opener gets
        paired = {i for i in (*answers, *opener_answers) if i >= 0}
        self.free = [i for i in rng.sample(range(len(topic.facts)), len(topic.facts)) if i not in paired]

    def fact(self, voice: Voice, i: int) -> str | None:
        """Fact `i`, marked used, if it is left and fits the budget."""
        text = self.topic.facts[i]
        if i in self.facts_left and voice.budget.fits(text):
            voice.budget.use(text)
            self.facts_left.discard(i)
            return text
        return None

    def free_fact(self, voice: Voice) -> str | None:
        """An unpaired fact (else any fact) that is left and fits."""
        for i in (*self.free, *sorted(self.facts_left)):
            got = self.fact(voice, i) if i in self.facts_left else None
            if got:
                return got
        return None

    def question(self, voice: Voice, paired_only: bool = False) -> tuple[str, int] | None:
        """A question left whose text fits and whose answer (if paired) is still left and fits."""
        t = self.topic
        for k, (q, a) in enumerate(self.questions):
            ok = (a >= 0 or not paired_only) and voice.budget.fits(q) and (a < 0 or (a in self.facts_left and voice.budget.fits(q, t.facts[a])))
            if ok:
                del self.questions[k]
                voice.budget.use(q)
                return q, a
        return None

    def opener(self, voice: Voice) -> tuple[str, int] | None:
        t = self.topic
        for k, (o, a) in enumerate(self.openers):
            if voice.budget.fits(o) and (a < 0 or (a in self.facts_left and voice.budget.fits(o, t.facts[a]))):
                del self.openers[k]
                voice.budget.use(o)
                return o, a
        return None

    def can_tell(self, voice: Voice) -> bool:
        """Whether a detail is left that fits the budget (a long history spends a topic's details)."""
        return any(voice.budget.fits(d) for d in self.details)

    def detail(self, voice: Voice) -> str | None:
        for k, d in enumerate(self.details):
            if voice.budget.fits(d):
                del self.details[k]
                voice.budget.use(d)
                return d
        return None


def _answer(rng: random.Random, voice: Voice, talk: SessionTalk, fact_index: int, lead: str) -> str | None:
    """An answer: `lead` and the paired fact (or, for none, a hedge and a free fact), sometimes a
    second free fact and a short check."""
    if fact_index >= 0:
        first = talk.fact(voice, fact_index)
        text = join(lead, first) if first else None
    else:
        first = talk.free_fact(voice)
        text = join(rng.choice(HEDGES), first) if first else None
    if text is None:
        return None
    if rng.random() < SECOND_FACT_PROB:
        more = talk.free_fact(voice)
        if more:
            text = f"{text} {join('Also,', more)}"
    if rng.random() < CHECK_PROB:
        text = f"{text} {rng.choice(CHECKS)}"
    return text


def _details(rng: random.Random, voice: Voice, talk: SessionTalk, probs: tuple[float, ...]) -> str:
    """Situation details the user tells, one after another: the k-th with probs[k] (stops at the
    first not drawn, or when the topic has none left)."""
    told = []
    for p in probs:
        d = talk.detail(voice) if rng.random() < p else None
        if d is None:
            break
        told.append(d)
    return " ".join(told)


def _opening(rng: random.Random, voice: Voice, talk: SessionTalk, lead: str) -> tuple[str, str] | None:
    """The pair that opens talk on the topic: the user's opener (sometimes with a detail) and the
    assistant's answer; None if the topic has nothing left that fits."""
    talk.started = True
    topic = talk.topic
    if not talk.can_tell(voice):  # told too often in this history already: another topic
        return None
    got = talk.opener(voice) if rng.random() < 0.7 else None
    if got is None:
        generic = bank.HELP_OPENERS if topic.kind == "help" else bank.CHAT_OPENERS
        text = voice.budget.first_fitting(t.format(topic=topic.topic) for t in rng.sample(generic, len(generic)))
        got = (text, -1) if text else talk.opener(voice)
    if got is None:
        return None
    opener, fact_index = got
    user = join(lead, opener)
    told = _details(rng, voice, talk, (DETAIL_PROB, SECOND_DETAIL_PROB, THIRD_DETAIL_PROB))
    if told:
        user = f"{user} {told}"
    ack = rng.choice(OPEN_ACKS if topic.kind == "help" or opener.rstrip().endswith("?") else CHAT_ACKS)
    first = talk.fact(voice, fact_index) if fact_index >= 0 else talk.free_fact(voice)
    if first is None:
        return None
    answer = f"{ack} {first}"
    if rng.random() < CHECK_PROB:
        answer = f"{answer} {rng.choice(CHECKS)}"
    return with_aside(rng, voice, user), answer


def _follow_up(rng: random.Random, voice: Voice, talk: SessionTalk, lead: str | None) -> tuple[str, str] | None:
    """A follow-up pair on the topic: a question and its answer, or a detail told and acknowledged;
    None when the topic has nothing left that fits."""
    prefix = lead if lead is not None else rng.choice(REACTIONS)
    if not talk.can_tell(voice):  # the user has told all there is to tell about it: on to another topic
        return None
    if rng.random() < QUESTION_PROB:
        got = talk.question(voice)
        if got is not None:
            q, fact_index = got
            answer = _answer(rng, voice, talk, fact_index, rng.choice(ANSWER_LEADS))
            if answer is not None:
                told = _details(rng, voice, talk, (EXTRA_DETAIL_PROB, SECOND_EXTRA_DETAIL_PROB))
                body = f"{told} {q}" if told else q
                if rng.random() < TWO_QUESTIONS_PROB:  # a second question, answered second
                    second = talk.question(voice, paired_only=True)  # (a hedge inside a sentence of fixed words would recur)
                    answer2 = _answer(rng, voice, talk, second[1], "") if second else None
                    if answer2 is not None:
                        body = f"{body} {join('Also,', second[0])}"  # type: ignore[index]
                        answer = f"{answer} {join(rng.choice(SECOND_ANSWER_LEADS), answer2)}"
                return with_aside(rng, voice, join(prefix, body)), answer
    d = _details(rng, voice, talk, (1.0, SECOND_DETAIL_PROB, THIRD_DETAIL_PROB))
    if not d:
        return None
    reply = rng.choice(STATEMENT_ACKS)
    if rng.random() < STATEMENT_FACT_PROB:
        more = talk.free_fact(voice)
        if more:
            reply = f"{reply} {more}"
    return with_aside(rng, voice, join(prefix, d)), reply


def render_noise(rng: random.Random, voice: Voice, spec: NoiseSpec, n_turns: int, *, greet: bool = True, lead: str | None = None) -> list[str]:
    """A noise stretch of `n_turns` turns (user first, alternating), on the session's topic so far
    (`voice.talk`: a stretch after an exchange goes back to it; the writer clears it when a session
    starts). `greet`: the stretch opens its session; `lead`: the first turn's opening words instead
    of a greeting, a change of topic or a return to the topic."""
    if n_turns <= 0:
        return []
    talk = voice.talk
    resume = talk is not None and talk.started
    if talk is None:
        talk = voice.talk = SessionTalk(rng, topics_by_id().get(spec.topic_id) or load_noise_topics()[0])
    if lead is None:
        lead = rng.choice(RESUMES) if resume else rng.choice(bank.GREETINGS if greet else bank.TOPIC_CHANGES)
    texts: list[str] = []
    pairs = n_turns // 2
    closing = pairs >= 3 and rng.random() < CLOSING_PROB
    for k in range(pairs):
        if k == pairs - 1 and closing:
            texts += [with_aside(rng, voice, rng.choice(bank.CLOSINGS_USER)), rng.choice(bank.CLOSINGS_ASSISTANT)]
            break
        first_lead = lead if k == 0 else None
        pair = _follow_up(rng, voice, talk, first_lead) if talk.started else _opening(rng, voice, talk, first_lead or "")
        tries = 0
        while pair is None and tries < 8:  # the topic is spent in this history: move on to another one
            tries += 1
            talk.switch(rng, other_topic(rng, talk.topic))
            pair = _opening(rng, voice, talk, rng.choice(bank.TOPIC_CHANGES))
        if pair is None:
            pair = (rng.choice(USER_FALLBACK), rng.choice(ASSISTANT_FALLBACK))
        texts += list(pair)
    return texts[:n_turns]
