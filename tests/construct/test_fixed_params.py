from iba.construct.fixed_params import extract_fixed_params
from iba.types import ApiParam, ApiTemplate

API = ApiTemplate(
    name="order_food",
    params=[
        ApiParam(name="cuisine", enum=["italian", "japanese"], slot=True, dimension="cuisine"),
        ApiParam(name="delivery_time", description="Delivery time, HH:MM."),
        ApiParam(name="servings", type="integer", minimum=1, maximum=10),
        ApiParam(name="payment", enum=["card", "cash"]),
    ],
)


def test_times_counts_and_enums_are_read_from_the_template():
    assert extract_fixed_params("Order from {topic} for three people, delivered at 7:30, pay by card.", API) == {
        "delivery_time": "07:30",
        "servings": 3,
        "payment": "card",
    }
    assert extract_fixed_params("Dinner from {topic} around 19:00, just for me.", API) == {"delivery_time": "19:00", "servings": 1}


def test_ambiguous_or_missing_values_are_left_out():
    # two different counts: which is the servings? leave it out; slots are never fixed
    assert extract_fixed_params("Order two mains and one dessert, italian please.", API) == {}
    # the topic is not read: numbers in it do not leak into fixed params
    assert extract_fixed_params("Order from {topic}.", API) == {}
