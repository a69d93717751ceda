"""Word banks for personas (B background, T traits, R role). Pure data, no logic."""

from __future__ import annotations

FIRST_NAMES: tuple[str, ...] = (
    "Aiko", "Amara", "Andrei", "Anika", "Arjun", "Beatriz", "Bilal", "Camila", "Chen", "Chiara",
    "Dalia", "Daniel", "Dmitri", "Elena", "Emeka", "Erik", "Fatima", "Felix", "Freya", "Gabriel",
    "Hana", "Hassan", "Ines", "Isaac", "Ivy", "Jae-won", "Jamal", "Javier", "Jonas", "Julia",
    "Kavya", "Kenji", "Kofi", "Lara", "Leila", "Liam", "Lucia", "Mads", "Maya", "Mei",
    "Mateo", "Miriam", "Nadia", "Naveen", "Nia", "Noah", "Olga", "Omar", "Paloma", "Pedro",
    "Priya", "Rafael", "Rania", "Ravi", "Rosa", "Ruth", "Sakura", "Samir", "Sara", "Sebastian",
    "Sofia", "Stefan", "Sunita", "Tariq", "Tessa", "Thabo", "Tomas", "Uma", "Valentina", "Victor",
    "Wen", "Xavier", "Yara", "Yusuf", "Zainab", "Zoe", "Ahmed", "Bianca", "Caleb", "Dana",
)
LAST_NAMES: tuple[str, ...] = (
    "Abe", "Adeyemi", "Alvarez", "Andersen", "Bakker", "Banerjee", "Becker", "Bianchi", "Costa", "Dubois",
    "Eriksson", "Farouk", "Fischer", "Garcia", "Gomez", "Haddad", "Hansen", "Horvath", "Ibrahim", "Ivanova",
    "Jansen", "Kaur", "Kim", "Kowalski", "Kumar", "Laurent", "Lee", "Lindqvist", "Lopez", "Mahlangu",
    "Martin", "Mendes", "Moreau", "Murphy", "Nakamura", "Nguyen", "Novak", "Okafor", "Oliveira", "Osei",
    "Park", "Patel", "Petrov", "Popescu", "Quinn", "Rahman", "Reyes", "Rossi", "Santos", "Sato",
    "Schmidt", "Shah", "Silva", "Singh", "Sokolov", "Suzuki", "Tan", "Tanaka", "Torres", "Tran",
    "Usman", "Van Dijk", "Vargas", "Wang", "Weber", "Wong", "Yamamoto", "Yilmaz", "Zhang", "Zhou",
)
CITIES: tuple[str, ...] = (
    "Lisbon, Portugal", "Toronto, Canada", "Singapore", "Nairobi, Kenya", "Austin, USA", "Berlin, Germany",
    "Seoul, South Korea", "Melbourne, Australia", "Mexico City, Mexico", "Manchester, UK", "Osaka, Japan",
    "Lagos, Nigeria", "Bangalore, India", "Sao Paulo, Brazil", "Stockholm, Sweden", "Chicago, USA",
    "Cape Town, South Africa", "Warsaw, Poland", "Istanbul, Turkey", "Vancouver, Canada", "Shenzhen, China",
    "Madrid, Spain", "Dublin, Ireland", "Auckland, New Zealand", "Cairo, Egypt", "Hanoi, Vietnam",
    "Amsterdam, Netherlands", "Buenos Aires, Argentina", "Denver, USA", "Helsinki, Finland", "Milan, Italy",
    "Kuala Lumpur, Malaysia", "Accra, Ghana", "Prague, Czechia", "Lyon, France", "Taipei, Taiwan",
    "Zurich, Switzerland", "Bogota, Colombia", "Edinburgh, UK", "Copenhagen, Denmark",
)
EDUCATION: tuple[str, ...] = (
    "high-school diploma", "vocational certificate", "bachelor's degree in computer science",
    "bachelor's degree in economics", "bachelor's degree in nursing", "master's degree in engineering",
    "master's degree in education", "PhD in biology", "bachelor's degree in graphic design",
    "master's degree in public health", "associate degree in accounting", "bachelor's degree in literature",
    "MBA", "master's degree in statistics", "bachelor's degree in architecture", "law degree",
)
HOUSEHOLDS: tuple[str, ...] = (
    "lives alone", "lives with a partner", "lives with a partner and two kids", "shares a flat with two friends",
    "single parent of a teenager", "lives with elderly parents", "married, one toddler", "lives with a partner and a dog",
    "lives alone with two cats", "recently moved in with a sibling",
)
HOBBIES: tuple[str, ...] = (
    "trail running", "sourdough baking", "chess", "bouldering", "watercolour painting", "birdwatching",
    "amateur astronomy", "cycling", "board games", "gardening", "photography", "salsa dancing", "knitting",
    "podcasts about history", "woodworking", "swimming", "learning Japanese", "jazz piano", "camping",
    "video games", "yoga", "volunteering at a food bank", "fantasy novels", "home brewing", "pottery",
    "football", "tennis", "sketching", "crossword puzzles", "film photography",
)
TRAITS: tuple[str, ...] = (
    "detail-oriented", "impatient", "curious", "pragmatic", "anxious about deadlines", "easygoing",
    "perfectionist", "sociable", "introverted", "organised", "spontaneous", "skeptical", "warm",
    "direct", "thrifty", "ambitious", "cautious", "creative", "methodical", "witty", "stubborn",
    "empathetic", "competitive", "reserved", "optimistic", "blunt", "health-conscious", "restless",
    "loyal", "absent-minded",
)
# R: current professional or social role (short-term: it may change and contradict old habits).
ROLES: tuple[str, ...] = (
    "backend engineer at a logistics startup", "secondary-school chemistry teacher", "ICU nurse on night shifts",
    "freelance graphic designer", "product manager at a fintech company", "PhD student in ecology",
    "small-business owner running a bakery", "data analyst at a retail chain", "junior lawyer",
    "UX researcher", "civil engineer on a bridge project", "marketing lead at a travel agency",
    "new parent on parental leave", "retired accountant volunteering part-time", "university admissions officer",
    "site reliability engineer", "physiotherapist", "journalist covering technology", "HR business partner",
    "master's student in public policy", "restaurant manager", "museum educator", "sales representative",
    "technical writer at a SaaS company", "pharmacist", "architect at a mid-size firm", "game developer",
    "supply-chain coordinator", "startup founder preparing a funding round", "community organiser",
    "research scientist in a biotech lab", "bank branch manager", "high-school student preparing for exams",
    "freelance translator", "operations manager at a hospital", "job seeker after a layoff",
    "customer-support team lead", "mechanical engineer", "personal trainer", "city planner",
)
