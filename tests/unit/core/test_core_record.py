"""Records behave as the frozen dataclasses they replace."""

from __future__ import annotations

from typing import ClassVar

import pytest

from rendezvous.core.record import FrozenError, asdict, field, fields, record, replace


@record
class Point:
    x: int
    y: int = 0
    tags: frozenset[str] = field(default_factory=frozenset)
    LIMIT: ClassVar[int] = 10


@record
class Other:
    x: int
    y: int = 0
    tags: frozenset[str] = field(default_factory=frozenset)


@record
class Point3(Point):
    z: int = 0


@record(order=True)
class Version:
    major: int
    minor: int


@record(repr=False)
class Secret:
    key: bytes

    def __repr__(self) -> str:
        return "Secret(...)"


@record
class Checked:
    value: int
    doubled: int = 0

    def __post_init__(self) -> None:
        if self.value < 0:
            raise ValueError(f"value {self.value} is negative")
        object.__setattr__(self, "doubled", 2 * self.value)


def test_arguments_by_position_and_by_name_with_defaults():
    assert Point(1) == Point(x=1, y=0, tags=frozenset())
    assert (Point(1, 2).x, Point(1, 2).y) == (1, 2)
    assert Point(y=3, x=4) == Point(4, 3)


def test_a_default_factory_makes_a_new_value_for_each_instance():
    @record
    class Bag:
        items: list[int] = field(default_factory=list)

    assert Bag().items == [] and Bag().items is not Bag().items


def test_wrong_arguments_are_a_type_error_naming_the_argument():
    with pytest.raises(TypeError, match="missing argument 'x'"):
        Point()
    with pytest.raises(TypeError, match="unexpected keyword argument 'w'"):
        Point(1, w=2)
    with pytest.raises(TypeError, match="multiple values for argument 'x'"):
        Point(1, x=2)
    with pytest.raises(TypeError, match="takes 3 arguments but 4 were given"):
        Point(1, 2, frozenset(), 4)


def test_fields_cannot_be_set_nor_deleted():
    p = Point(1)
    with pytest.raises(FrozenError, match="'x'"):
        p.x = 2  # type: ignore[misc]
    with pytest.raises(FrozenError):
        del p.x
    with pytest.raises(AttributeError):  # FrozenError is an AttributeError, as dataclasses'
        p.y = 5  # type: ignore[misc]
    assert p == Point(1)


def test_equal_and_hashed_by_fields_and_never_equal_to_another_class():
    assert Point(1, 2) == Point(1, 2) and Point(1, 2) != Point(2, 1)
    assert hash(Point(1, 2)) == hash(Point(1, 2))
    assert len({Point(1, 2), Point(1, 2), Point(2, 1)}) == 2
    assert Point(1, 2) != Other(1, 2)
    assert Point(1, 2) != (1, 2, frozenset())


def test_repr_names_the_class_and_every_field_unless_the_class_writes_its_own():
    assert repr(Point(1, 2)) == "Point(x=1, y=2, tags=frozenset())"
    assert repr(Secret(b"key")) == "Secret(...)"


def test_order_compares_field_by_field_and_only_when_asked_for():
    assert Version(1, 2) < Version(1, 10) < Version(2, 0)
    assert max([Version(1, 2), Version(3, 0), Version(2, 9)]) == Version(3, 0)
    assert Version(1, 2) <= Version(1, 2) and Version(2, 0) >= Version(1, 9) > Version(1, 8)
    with pytest.raises(TypeError):
        Point(1) < Point(2)  # type: ignore[operator]
    with pytest.raises(TypeError):
        Version(1, 2) < (1, 3)  # type: ignore[operator]


def test_match_by_position():
    match Point(1, 2):
        case Point(x, y):
            assert (x, y) == (1, 2)
        case _:
            pytest.fail("no match")


def test_post_init_checks_and_derives_after_every_construction_and_replace():
    assert Checked(3).doubled == 6
    assert replace(Checked(3), value=5).doubled == 10
    with pytest.raises(ValueError, match="-1"):
        Checked(-1)
    with pytest.raises(ValueError):
        replace(Checked(3), value=-1)


def test_a_subclass_adds_fields_after_its_base_records():
    p = Point3(1, 2, frozenset({"a"}), 3)
    assert fields(Point3) == ("x", "y", "tags", "z")
    assert p.z == 3 and p != Point(1, 2, frozenset({"a"}))


def test_replace_changes_only_the_given_fields_and_leaves_the_original():
    p = Point(1, 2, frozenset({"a"}))
    q = replace(p, y=5)
    assert q == Point(1, 5, frozenset({"a"})) and p.y == 2
    with pytest.raises(TypeError, match="'w'"):
        replace(p, w=1)


def test_fields_lists_names_in_order_without_class_variables():
    assert fields(Point) == ("x", "y", "tags") == fields(Point(1))
    assert Point.LIMIT == 10


def test_a_plain_default_stays_readable_on_the_class():
    assert Point.y == 0


def test_asdict_turns_nested_records_into_dicts_for_json():
    @record
    class Line:
        ends: tuple[Point, ...]
        by_name: dict[str, Point]

    line = Line((Point(1), Point(2, 3)), {"a": Point(4)})
    assert asdict(line) == {
        "ends": ({"x": 1, "y": 0, "tags": frozenset()}, {"x": 2, "y": 3, "tags": frozenset()}),
        "by_name": {"a": {"x": 4, "y": 0, "tags": frozenset()}},
    }


def test_a_required_field_after_one_with_a_default_is_refused_at_definition():
    with pytest.raises(TypeError, match="'b' without a default follows"):

        @record
        class Bad:
            a: int = 0
            b: int
