"""The paper's Table 13 as data: its domains (also the fixed domain order), every scenario's
counts, and the overall totals. `iba.taxonomy.totals` compares a taxonomy with it."""

from __future__ import annotations

# domain id -> (name, short column name in the paper's tables); also the fixed domain order
PAPER_DOMAINS: dict[str, tuple[str, str]] = {
    "writing": ("Writing and Design", "Writing"),
    "work": ("Work", "Work"),
    "daily": ("Daily Consumption", "Daily"),
    "planning": ("Planning", "Plan."),
    "health": ("Exercise and Health", "Health"),
    "transportation": ("Transportation", "Trans."),
    "medical": ("Medical Services", "Med."),
    "leisure": ("Leisure Activities", "Leis."),
    "information": ("Information Management", "Info."),
}
DOMAIN_ORDER: tuple[str, ...] = tuple(PAPER_DOMAINS)

G, C = "generate", "call_api"
# domain id -> [(scenario id, D, P, I, dynamic, action)] in table order
_TABLE13_ROWS: dict[str, list[tuple[str, int, int, int, bool, str]]] = {
    "writing": [
        ("peer_review_report", 4, 9, 54, True, G),
        ("academic_paper", 6, 15, 71, True, G),
        ("research_proposal", 4, 13, 76, True, G),
        ("business_plan", 3, 8, 29, True, G),
        ("diary", 3, 7, 23, True, G),
        ("technical_documentation", 4, 12, 80, True, G),
        ("blog_post", 2, 4, 4, False, G),
        ("wechat_article", 3, 8, 27, True, G),
        ("novel", 2, 4, 6, False, G),
        ("resume", 5, 14, 72, True, G),
        ("short_video_script", 3, 11, 41, False, G),
        ("ppt_slides", 2, 9, 15, True, G),
        ("mind_map", 4, 20, 79, True, G),
        ("modular_course", 4, 14, 71, True, G),
        ("instruction_manual", 3, 15, 73, True, G),
        ("self_introduction", 3, 8, 29, False, G),
    ],
    "work": [
        ("scholarship_application", 7, 17, 140, True, G),
        ("performance_report_spreadsheet", 6, 23, 90, True, G),
        ("schedule_planning", 6, 31, 119, True, G),
        ("data_analysis", 4, 27, 101, True, G),
        ("programming", 5, 23, 90, True, G),
        ("leave_application", 4, 10, 93, False, G),
        ("project_management", 5, 22, 105, True, G),
        ("communication_management", 2, 5, 7, False, G),
        ("announcement_drafting", 3, 12, 74, True, G),
        ("event_organization", 4, 14, 111, False, G),
        ("work_summary", 4, 16, 113, True, G),
        ("terminology_explanation", 3, 14, 112, True, G),
    ],
    "daily": [
        ("food_ordering", 3, 15, 122, True, C),
        ("ticket_booking", 4, 17, 145, True, C),
        ("clothing_purchase", 4, 15, 153, True, C),
        ("digital_product_purchase", 4, 10, 89, False, C),
        ("accommodation_booking", 4, 12, 138, False, C),
        ("online_course_purchase", 5, 12, 154, False, C),
        ("book_purchase", 4, 12, 127, True, C),
        ("house_renting", 11, 28, 158, False, C),
    ],
    "planning": [
        ("weekly_plan", 4, 19, 122, True, G),
        ("monthly_plan", 4, 12, 107, True, G),
        ("long_term_goals", 3, 16, 130, True, G),
        ("project_plan", 4, 15, 114, False, G),
        ("financial_plan", 3, 13, 74, True, G),
        ("travel_plan", 5, 18, 123, True, G),
        ("study_plan", 4, 19, 154, True, G),
        ("career_development_plan", 4, 16, 100, True, G),
        ("habit_building_plan", 4, 18, 115, False, G),
        ("skill_improvement_plan", 4, 16, 112, True, G),
    ],
    "health": [
        ("exercise_plan", 5, 22, 260, True, G),
        ("diet_plan", 4, 21, 255, True, G),
        ("sleep_plan", 6, 32, 262, True, G),
        ("mental_health_support", 1, 6, 4, False, G),
    ],
    "transportation": [
        ("commute_route_planning", 5, 21, 236, False, C),
        ("ride_hailing", 2, 6, 8, False, C),
        ("sightseeing_route_planning", 4, 19, 215, False, C),
        ("parking", 3, 10, 59, False, C),
    ],
    "medical": [
        ("appointment_registration", 4, 15, 210, False, C),
        ("medicine_selection", 4, 17, 231, False, C),
        ("online_medical_consultation", 3, 14, 83, False, G),
    ],
    "leisure": [
        ("audio_visual_entertainment", 4, 24, 229, True, C),
        ("outdoor_leisure", 2, 5, 6, False, C),
        ("social_assistance", 3, 14, 98, True, G),
    ],
    "information": [
        ("research_report_writing", 4, 18, 174, True, G),
        ("timeline_organization", 3, 10, 41, True, G),
        ("meeting_minutes_organization", 3, 13, 60, True, G),
        ("reading_notes", 2, 9, 16, True, G),
        ("folder_organization", 5, 19, 191, False, G),
        ("tool_usage", 9, 34, 182, True, G),
    ],
}
# scenario id -> (D, P, I, dynamic, action)
PAPER_TABLE13: dict[str, tuple[int, int, int, bool, str]] = {
    row[0]: row[1:] for rows in _TABLE13_ROWS.values() for row in rows  # type: ignore[misc]
}
# scenario ids of each domain, in table order
PAPER_SCENARIOS: dict[str, list[str]] = {d: [r[0] for r in rows] for d, rows in _TABLE13_ROWS.items()}
PAPER_TOTALS: dict[str, int] = {
    "domains": 9,
    "scenarios": 66,
    "dimensions": 262,
    "values": 997,
    "call_api_scenarios": 16,
    "generate_scenarios": 50,
    "dynamic_scenarios": 43,
    "instances": 6962,
}
