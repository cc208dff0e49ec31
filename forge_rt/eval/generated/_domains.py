"""The vocabulary generated cases are drawn from: a dozen invented domains of linked records.

Each :class:`Domain` is a chain of four linked kinds of record (a clinic's patient is on a ward,
the ward has a charge nurse, the nurse has a pager), a dated log, a set of named zones, one
kind of record that can be created, changed and deleted, and tools that sound related but
answer nothing a case asks (distractors). Tool names are derived from it, so none of them is a
name the hand-written scenarios use (a test keeps the two apart).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["DOMAINS", "Dated", "Domain", "Entity", "Record", "Zones"]


class Entity(NamedTuple):
    """One kind of record in a domain's chain: what it is and the one fact its lookup reports.

    ``fact_kind`` is a key of :data:`~forge_rt.eval.generated._values.FACT_KINDS`.
    """

    noun: str
    fact: str
    fact_kind: str


class Dated(NamedTuple):
    """A per-day log: ``tool(date)`` reports ``fact`` (a ``fact_kind``) for that day."""

    tool: str
    what: str
    fact: str
    fact_kind: str


class Zones(NamedTuple):
    """Named areas: ``tool(param)`` takes one of ``choices`` (lower-case slugs) and reports
    ``fact`` about it. A request names a zone the way people say it (``North Bay``)."""

    tool: str
    param: str
    choices: tuple[str, ...]
    fact: str
    fact_kind: str


class Record(NamedTuple):
    """The kind of record a stateful case creates, changes or deletes, and its typed fields:
    ``category`` (one of ``categories``), ``integer``, ``number`` and ``boolean`` (each the
    name of a field of that JSON type)."""

    noun: str
    category: str
    categories: tuple[str, ...]
    integer: str
    number: str
    boolean: str


class Domain(NamedTuple):
    """A domain: what it is (``title``), its chain of kinds, the names of its first kind's
    records (``names``: two words each, so a list of them reads as one list), its log, its zones, its stateful record and its distractor tools."""

    key: str
    title: str
    chain: tuple[Entity, Entity, Entity, Entity]
    names: tuple[str, ...]
    dated: Dated
    zones: Zones
    record: Record
    distractors: tuple[tuple[str, str], ...]


DOMAINS: tuple[Domain, ...] = (
    Domain(
        key="clinic",
        title="a hospital clinic",
        chain=(
            Entity("patient", "date of birth", "date"),
            Entity("ward", "visiting hours start", "clock"),
            Entity("charge nurse", "full name", "name"),
            Entity("pager", "number", "phone"),
        ),
        names=("Halima Osei", "Piet Devries", "Consuelo Ibarra", "Rune Aasen", "Mae Whitcombe"),
        dated=Dated("count_admissions", "admissions", "number of admissions", "count"),
        zones=Zones(
            "wing_occupancy",
            "wing",
            ("north-wing", "south-wing", "maternity", "day-surgery"),
            "bed occupancy",
            "percent",
        ),
        record=Record(
            "referral", "urgency", ("routine", "soon", "urgent"), "visits", "copay", "insured"
        ),
        distractors=(
            ("cancel_referral_letter", "Withdraw a referral letter that was already sent."),
            ("print_wristband", "Print a patient wristband at the front desk."),
            ("list_formulary", "List the drugs on the hospital formulary."),
        ),
    ),
    Domain(
        key="library",
        title="a public library",
        chain=(
            Entity("title", "publication date", "date"),
            Entity("shelf", "aisle count", "count"),
            Entity("curator", "email address", "email"),
            Entity("reading room", "closing time", "clock"),
        ),
        names=(
            "Salt Orchard",
            "Quillan Winters",
            "Small Rivers",
            "Ferrous Light",
            "Paper Lanterns",
        ),
        dated=Dated("loans_on_day", "loans", "number of loans", "count"),
        zones=Zones(
            "floor_noise_level",
            "floor",
            ("ground-floor", "mezzanine", "basement-archive", "childrens-corner"),
            "noise reading",
            "percent",
        ),
        record=Record(
            "hold", "format", ("print", "audio", "large-print"), "copies", "fee", "notify"
        ),
        distractors=(
            ("renew_membership_card", "Renew a member's library card for a year."),
            ("suggest_reading", "Suggest books similar to a given one."),
            ("report_damaged_copy", "Flag a physical copy as damaged."),
        ),
    ),
    Domain(
        key="fleet",
        title="a delivery fleet",
        chain=(
            Entity("van", "odometer reading", "count"),
            Entity("route", "departure time", "clock"),
            Entity("depot", "manager", "name"),
            Entity("fuel card", "monthly limit", "decimal"),
        ),
        names=("Blue Sprinter", "Old Nine", "Kestrel Transit", "Red Ducato", "Grey Vivaro"),
        dated=Dated("deliveries_on_day", "deliveries", "number of deliveries", "count"),
        zones=Zones(
            "zone_congestion",
            "zone",
            ("harbour-district", "ring-road", "old-town", "airport-park"),
            "congestion index",
            "percent",
        ),
        record=Record(
            "service booking",
            "service",
            ("tyres", "brakes", "full-inspection"),
            "hours",
            "quote",
            "courtesy_vehicle",
        ),
        distractors=(
            ("estimate_toll_cost", "Estimate toll charges for a planned trip."),
            ("request_roadside_help", "Call roadside assistance for a broken-down van."),
            ("rank_drivers", "Rank drivers by on-time rate."),
        ),
    ),
    Domain(
        key="payroll",
        title="a payroll office",
        chain=(
            Entity("staff member", "start date", "date"),
            Entity("pay group", "gross monthly pay", "decimal"),
            Entity("cost centre", "budget holder", "name"),
            Entity("approval queue", "pending items", "count"),
        ),
        names=("Oskar Brandt", "Leilani Kahale", "Fenella Marsh", "Dmitri Sokolov", "Ada Quist"),
        dated=Dated("payslips_issued_on", "payslips issued", "number of payslips", "count"),
        zones=Zones(
            "region_tax_rate",
            "region",
            ("east-coast", "highlands", "capital-region", "islands"),
            "withholding rate",
            "percent",
        ),
        record=Record(
            "expense claim",
            "claim_type",
            ("travel", "meals", "equipment"),
            "receipts",
            "total",
            "reimbursed",
        ),
        distractors=(
            ("draft_offer_letter", "Draft an offer letter for a new hire."),
            ("lookup_holiday_calendar", "Public holidays of a given year."),
            ("export_ledger_csv", "Export the general ledger as CSV."),
        ),
    ),
    Domain(
        key="greenhouse",
        title="a commercial greenhouse",
        chain=(
            Entity("seed batch", "sowing date", "date"),
            Entity("bench", "tray count", "count"),
            Entity("grower", "email address", "email"),
            Entity("irrigation valve", "daily flow in litres", "decimal"),
        ),
        names=("Sungold Tomato", "Purple Carrot", "Gem Lettuce", "Thai Basil", "Lemon Thyme"),
        dated=Dated("harvest_log", "harvested crates", "crates harvested", "count"),
        zones=Zones(
            "bay_humidity",
            "bay",
            ("north-bay", "south-bay", "propagation", "cold-frame"),
            "relative humidity",
            "percent",
        ),
        record=Record(
            "planting order", "crop_type", ("leafy", "fruiting", "herb"), "trays", "cost", "organic"
        ),
        distractors=(
            ("forecast_frost", "Frost forecast for the coming nights."),
            ("order_fertiliser", "Order fertiliser from the supplier."),
            ("calibrate_sensor", "Recalibrate a climate sensor."),
        ),
    ),
    Domain(
        key="warehouse",
        title="a parts warehouse",
        chain=(
            Entity("part", "unit cost", "decimal"),
            Entity("bin", "quantity on hand", "count"),
            Entity("picker", "full name", "name"),
            Entity("handheld scanner", "last sync time", "clock"),
        ),
        names=("Hex Bolt", "Brass Elbow", "Rubber Gasket", "Hinge Pin", "Copper Washer"),
        dated=Dated("receipts_on_day", "goods receipts", "number of receipts", "count"),
        zones=Zones(
            "aisle_temperature",
            "aisle",
            ("cold-store", "mezzanine-racks", "bulk-floor", "returns-cage"),
            "temperature in Celsius",
            "decimal",
        ),
        record=Record(
            "stock adjustment",
            "reason",
            ("damaged", "recount", "expired"),
            "units",
            "value",
            "approved",
        ),
        distractors=(
            ("print_pick_list", "Print a pick list for a shift."),
            ("book_forklift_training", "Book forklift training for a picker."),
            ("compare_suppliers", "Compare supplier lead times."),
        ),
    ),
    Domain(
        key="observatory",
        title="an astronomical observatory",
        chain=(
            Entity("observing proposal", "submission date", "date"),
            Entity("telescope", "mirror size in metres", "decimal"),
            Entity("night operator", "full name", "name"),
            Entity("dome", "opening time", "clock"),
        ),
        names=("Dusty Disk", "Cepheid Ladder", "Faint Companion", "Comet Watch", "Deep Field"),
        dated=Dated("clear_hours_on", "clear-sky hours", "clear hours", "count"),
        zones=Zones(
            "site_seeing",
            "site",
            ("summit-ridge", "east-plateau", "valley-station"),
            "seeing percentile",
            "percent",
        ),
        record=Record(
            "time allocation",
            "priority_class",
            ("filler", "standard", "target-of-opportunity"),
            "nights",
            "moon_fraction",
            "remote",
        ),
        distractors=(
            ("convert_coordinates", "Convert sky coordinates between epochs."),
            ("moon_phase", "Phase of the moon on a date."),
            ("archive_frames", "Move raw frames to the archive."),
        ),
    ),
    Domain(
        key="marina",
        title="a yacht marina",
        chain=(
            Entity("vessel", "length in metres", "decimal"),
            Entity("berth", "monthly fee", "decimal"),
            Entity("harbour hand", "phone number", "phone"),
            Entity("shift", "start time", "clock"),
        ),
        names=("Morning Tern", "Salty Margaret", "Blue Cormorant", "Quiet Fathom", "Wren Seven"),
        dated=Dated("arrivals_on_day", "arrivals", "number of arrivals", "count"),
        zones=Zones(
            "pontoon_depth",
            "pontoon",
            ("outer-pontoon", "inner-basin", "fuel-dock", "visitor-quay"),
            "depth at low tide in metres",
            "decimal",
        ),
        record=Record(
            "mooring request",
            "hull_type",
            ("monohull", "catamaran", "motor"),
            "nights",
            "deposit",
            "shore_power",
        ),
        distractors=(
            ("tide_table", "High and low tides for a date."),
            ("order_diesel", "Order diesel for the fuel dock."),
            ("issue_gate_fob", "Issue a gate fob to a berth holder."),
        ),
    ),
    Domain(
        key="brewery",
        title="a craft brewery",
        chain=(
            Entity("brew", "brew date", "date"),
            Entity("fermenter", "volume in hectolitres", "decimal"),
            Entity("cellar lead", "email address", "email"),
            Entity("cleaning cycle", "next start time", "clock"),
        ),
        names=("Harbour Porter", "Juniper Saison", "Copper Bitter", "Ferry Stout", "Rye Lager"),
        dated=Dated("kegs_filled_on", "kegs filled", "number of kegs", "count"),
        zones=Zones(
            "cellar_temperature",
            "cellar",
            ("cold-room", "barrel-hall", "packaging-line"),
            "temperature in Celsius",
            "decimal",
        ),
        record=Record(
            "keg order", "keg_size", ("pin", "firkin", "kilderkin"), "kegs", "price", "returnable"
        ),
        distractors=(
            ("label_designs", "List the approved label designs."),
            ("duty_calculator", "Alcohol duty owed on a volume."),
            ("book_tasting_tour", "Book a tasting tour for visitors."),
        ),
    ),
    Domain(
        key="theatre",
        title="a repertory theatre",
        chain=(
            Entity("production", "opening night", "date"),
            Entity("stage", "seat count", "count"),
            Entity("stage manager", "full name", "name"),
            Entity("rehearsal slot", "call time", "clock"),
        ),
        names=(
            "Glass Ferryman",
            "Small Mercies",
            "Lanterns Lit",
            "Uncle Borislav",
            "Winter Quarters",
        ),
        dated=Dated("tickets_sold_on", "tickets sold", "number of tickets", "count"),
        zones=Zones(
            "house_section_sales",
            "section",
            ("stalls", "dress-circle", "upper-circle", "boxes"),
            "share of seats sold",
            "percent",
        ),
        record=Record(
            "group booking",
            "seating",
            ("stalls", "circle", "box"),
            "seats",
            "discount",
            "wheelchair_access",
        ),
        distractors=(
            ("print_programme", "Send the programme to the printer."),
            ("costume_inventory", "List costumes in storage."),
            ("review_digest", "Collect press reviews of a show."),
        ),
    ),
    Domain(
        key="apiary",
        title="a beekeeping cooperative",
        chain=(
            Entity("hive", "last inspection date", "date"),
            Entity("apiary site", "hive count", "count"),
            Entity("beekeeper", "phone number", "phone"),
            Entity("extractor", "booked slot", "clock"),
        ),
        names=("Lavender Row", "Orchard East", "Heather Top", "Mill Meadow", "Sloe Hedge"),
        dated=Dated("honey_extracted_on", "honey extracted", "kilograms extracted", "decimal"),
        zones=Zones(
            "forage_bloom",
            "forage_area",
            ("clover-fields", "lime-avenue", "heath", "rapeseed-strip"),
            "bloom coverage",
            "percent",
        ),
        record=Record(
            "swarm report",
            "colony_state",
            ("clustered", "in-cavity", "collected"),
            "frames",
            "weight_kg",
            "queen_seen",
        ),
        distractors=(
            ("varroa_treatment_guide", "Guidance on varroa treatments."),
            ("sell_jars", "Record a sale of honey jars."),
            ("weather_window", "Flying weather for the bees this week."),
        ),
    ),
    Domain(
        key="school",
        title="a secondary school office",
        chain=(
            Entity("pupil", "enrolment date", "date"),
            Entity("form group", "room capacity", "count"),
            Entity("form tutor", "email address", "email"),
            Entity("timetable block", "start time", "clock"),
        ),
        names=(
            "Priya Ramaswamy",
            "Callum Fairbairn",
            "Noor Haddad",
            "Elodie Marchetti",
            "Tobias Lund",
        ),
        dated=Dated("absences_on_day", "absences", "number of absences", "count"),
        zones=Zones(
            "building_heating",
            "building",
            ("science-block", "sports-hall", "old-library", "annexe"),
            "heating output",
            "percent",
        ),
        record=Record(
            "trip consent",
            "trip_kind",
            ("museum", "field-study", "residential"),
            "nights",
            "cost",
            "medical_form",
        ),
        distractors=(
            ("mark_homework", "Mark a homework submission."),
            ("bus_timetable", "School bus times for a route."),
            ("order_uniform", "Order uniform items for a pupil."),
        ),
    ),
)
"""Every domain a generated case may use."""
