"""The wire format: the one place that knows how the profiling buffer is laid out.

The device ops (``sm_profiler.triton_ops``, ``sm_profiler.gluon_ops``, ``cute_ops``, the CUDA
C++ header and auto mode, most through ``sm_profiler.record.ptx``) and the host decoder import the
constants below; nobody else retypes a magic number or an offset. `open_lane` is the lane rule
that every device spelling is tested against (tests/device/test_lane_rule.py).

The buffer is an array of little-endian 64-bit words, allocated once::

    word 0..7            global header (HEADER_WORDS)
      w0  = MAGIC (low 32) | VERSION (high 32)
      w1  = num_blocks (low 32) | num_groups (high 32)
      w2  = capacity (low 32, records per lane) | flags (high 32)
      w3  = slot control (HDR_SLOTS, version 4), read by every init: next slot (low 32, the
            launches so far: a tiny device step adds 1 after each launch, in stream order) |
            last slot (high 32, num_slots - 1). Zero (the default) is one slot that never moves.
      w4  = launch label (HDR_LABEL, version 4): the host's label id of the launch that filled
            this slot (kernel name, grid, call site), written by the slot step; 0 = none
      w5..w6 reserved, zero
      w7  = device scratch (HDR_SCRATCH): lanes outside the buffer's shape are given capacity 0
            and records at lane 0's start, so their "overflow" stores (their cursors) land in
            w7 and never outside the buffer; this lets every event skip a per-thread "is my
            lane real" test. The decoder only reports whether w7 was written; in an emulated
            buffer bit 31 (SCRATCH_REOPENED) says that a lane was opened twice.
    then num_blocks * num_groups lanes, lane index = block * num_groups + group,
    each LANE_HEADER_WORDS + capacity words long:
      l0  = anchor: the full 64-bit %globaltimer, read when the lane was initialised
      l1  = sm_id (low 32) | last_dropped (high 32)
            In a ring buffer (FLAG_RING) a lane closed by profiler_flush holds instead
            RING_MARK | attempted (records attempted, low 31 bits); its records are a ring: the
            newest is at slot (attempted - 1) % capacity, capacity a power of two.
            `last_dropped` is written only when the lane overflows: the index (0-based cursor) of the
            latest record that did not fit, so the lane attempted last_dropped + 1 records. It is
            never 0 once written (it is >= the records kept, and >= 1; before version 3 also
            >= capacity, with a full lane); 0 means the lane did not overflow. A direct lane overflows past `capacity` and stores its cursor as it is,
            which costs no arithmetic; a staged lane (STAGE < capacity) can also overflow its
            stage, keeping fewer than `capacity` records (see ptx.py, "Staged recording").
      l2.. capacity records, each one 64-bit word, each written with ONE store:
            bits  0..31  low 32 bits of %globaltimer (ns; wraps every 2**32 ns = 4.29 s)
            bits 32..63  tag:
              tag bits  0..1   kind: 1 begin, 2 end, 3 instant (0 = empty slot, never written)
              tag bits  2..13  event id (0..MAX_EVENT_ID)
              tag bits 14..31  reserved, zero
            The time sits in the low word because the device reads the 64-bit %globaltimer into a
            register pair and the low register is already in place: only the tag is moved into
            the high register, one instruction per event.

Launch slots (version 4). A buffer may hold num_slots copies of the layout above, back to back
(slot k at word k * slot_words, each with its own header), then one spare header (HEADER_WORDS
words) that takes the scratch stores of launches that found every slot used::

    slot = min(w3.lo32, w3.hi32 + 1)            # of slot 0's header
    base = buffer + slot * slot_words           # slot_words = buffer_words(nb, ng, capacity)
    the launch's lanes are those of the buffer at `base`, and none is valid if slot > w3.hi32

so a launch past the last slot writes nothing but the spare header's scratch word: slots that
run out are counted (w3.lo32 - num_slots), never overwritten. A one-slot buffer (w3 = 0) is
exactly the version-3 layout. The init pays one more header load and a multiply-add; events pay
nothing. The host splits the slots into one capture each (`split_slots`).

One lane has one writer (a program's leading warp or thread, or one warp), which keeps its cursor in a register,
so the device needs no atomics, no fences and no host synchronisation. The host zeroes the
buffer before each launch; an empty slot is zero and every written record is not, which is how
the decoder counts records when the lane did not overflow.

64-bit times are rebuilt from the anchor: each record is placed after the previous one (or after
the anchor) by the forward distance of the low words modulo 2**32. This is exact for kernels of
any length as long as consecutive events of one lane are less than 4.29 s apart.
"""

from __future__ import annotations

import numpy as np

from ..errors import ConfigError

MAGIC = 0x46504D53  # b"SMPF" read as a little-endian u32
VERSION = 4
# Versions this decoder reads: version 1 is version 2 with the scratch word always zero; version 2
# is version 3 where a lane drops records only once it is full (no staged lanes); version 3 is
# version 4 with one slot (w3 = w4 = 0).
READABLE_VERSIONS = (1, 2, 3, 4)
# From this version on, header words w3 (slot control) and w4 (launch label) may be nonzero.
VERSION_SLOTS = 4
# From this version on, a lane may drop records before it is full (a staged lane whose stage
# was smaller than its capacity), so last_dropped is checked against the records kept only.
VERSION_EARLY_DROPS = 3

HEADER_WORDS = 8
LANE_HEADER_WORDS = 2
WORD_BYTES = 8

# Offsets inside the global header, in words.
HDR_MAGIC_VERSION = 0
HDR_SHAPE = 1  # num_blocks | num_groups << 32
HDR_CAPACITY_FLAGS = 2  # capacity | flags << 32
HDR_SLOTS = 3  # next slot (low 32) | last slot (high 32), in slot 0's header; 0 = one slot
HDR_LABEL = 4  # label id of the launch that filled this slot; 0 = none
HDR_SCRATCH = 7  # written by out-of-shape lanes (their drop cursors); ignored by the decoder
# Under the CPU interpreter the ops also flag, in the scratch word, what the device does not
# check: an out-of-shape lane (the high half, where a GPU's drop cursor goes) and a lane opened
# twice (bit 31 of the low half, which no device op writes): a second launch into one buffer.
SCRATCH_OUT_OF_SHAPE = 1 << 32
SCRATCH_REOPENED = 1 << 31

# Offsets inside a lane, in words.
LANE_ANCHOR = 0
LANE_SM_ATTEMPTED = 1  # sm_id | last_dropped << 32 (attempted - 1; 0 = no overflow)

# Record kinds (bits 0..1 of a record).
KIND_BEGIN = 1
KIND_END = 2
KIND_INSTANT = 3
KIND_BITS = 2
KIND_MASK = (1 << KIND_BITS) - 1

EVENT_SHIFT = KIND_BITS
EVENT_BITS = 12
EVENT_MASK = (1 << EVENT_BITS) - 1
MAX_EVENT_ID = EVENT_MASK  # 4095
NUM_EVENT_IDS = MAX_EVENT_ID + 1

TAG_RESERVED_MASK = 0xFFFFFFFF & ~((1 << (EVENT_SHIFT + EVENT_BITS)) - 1)
TAG_SHIFT = 32  # the tag is the record's high 32-bit word; the time is the low word
LOW32 = 0xFFFFFFFF

# Limits chosen so that every index the device computes fits its 32/64-bit arithmetic and the
# host never allocates something absurd by accident.
MAX_BLOCKS = 1 << 24
MAX_GROUPS = 1 << 10
MAX_CAPACITY = 1 << 24
MAX_BUFFER_BYTES = 1 << 36  # 64 GiB
MAX_SLOTS = 1 << 20  # launches one slotted buffer holds
# Decoded times and SM ids are int64 / int32 columns (SM -1: lane never initialised): larger
# anchors, rebuilt times or SM ids are corruption, refused instead of wrapping negative.
MAX_TIME_NS = (1 << 63) - 1
MAX_SM_ID = (1 << 31) - 1

# Header flags (w2, high 32 bits).
FLAG_EMULATED = 1 << 0  # written by the CPU interpreter: host clock, emulated SM ids
# Ring mode: lanes keep their newest records. Ops compiled with RING=True store record n in slot
# n & (capacity - 1) and profiler_flush writes RING_MARK | n (records attempted) into the high
# half of lane word 1; ops compiled without it ignore the flag (a lane keeps its first records).
FLAG_RING = 1 << 1
KNOWN_FLAGS = FLAG_EMULATED | FLAG_RING
RING_MARK = 1 << 31


def make_tag(event_id: int, kind: int) -> int:
    """The high 32 bits of a record (event id and kind), next to the timer's low word."""
    return (event_id << EVENT_SHIFT) | kind


def lane_word1(sm_id: int, attempted: int, capacity: int) -> int:
    """Lane word 1 as the device leaves it after `attempted` records into `capacity` slots."""
    last_dropped = attempted - 1 if attempted > capacity else 0
    return sm_id | (last_dropped << 32)


def make_record(time_ns: int, event_id: int, kind: int) -> int:
    """One record word, exactly as the device writes it."""
    return (make_tag(event_id, kind) << TAG_SHIFT) | (time_ns & LOW32)


def lane_stride_words(capacity: int) -> int:
    return LANE_HEADER_WORDS + capacity


def buffer_words(num_blocks: int, num_groups: int, capacity: int) -> int:
    return HEADER_WORDS + num_blocks * num_groups * lane_stride_words(capacity)


def slot_control(next_slot: int, num_slots: int) -> int:
    """Header word w3: the slot the next launch takes, and the last slot."""
    return (next_slot & LOW32) | ((num_slots - 1) << 32)


def slotted_words(layout_words: int, num_slots: int) -> int:
    """Words of a slotted buffer: `num_slots` slots of `layout_words` each, then the spare header."""
    return num_slots * layout_words + HEADER_WORDS


def open_lane(header_words, block: int, group: int) -> tuple[int, int, int]:
    """The lane rule: where lane (block, group) of this launch records. Every device spelling
    (ptx.OPEN_LANE for Gluon and CUDA C++; triton_ops' `_launch_slot`/`_lane_in_slot` for Triton; cute_ops.init's IR for CuteDSL) computes
    this; tests/device/test_lane_rule.py runs each against it.

    `header_words`: slot 0's global header (at least HEADER_WORDS words). `block`, `group`: the
    lane's indices, taken as unsigned 32-bit (a negative index is a huge one, out of shape).
    Returns (offset_words, capacity, ring_mask), in the device's unsigned 32/64-bit arithmetic:

    offset_words  records[0] of the lane is buffer word HEADER_WORDS + offset_words (u64):
                  slot * slot_words + lane * (capacity + LANE_HEADER_WORDS) + LANE_HEADER_WORDS,
                  with slot = min(w3.lo32, w3.hi32 + 1) and lane = block * num_groups + group
    capacity      the header's capacity; 0 for a lane outside the shape (block >= num_blocks,
                  group >= num_groups, or slot > w3.hi32: every slot used), whose offset is then
                  slot * slot_words, the end of its slot's global header: each of its events
                  takes the overflow path and stores its cursor into that header's scratch word
    ring_mask     capacity - 1 for a real lane of a ring buffer (FLAG_RING), else all ones (u32)
    """
    u64 = (1 << 64) - 1
    num_blocks, num_groups = (
        int(header_words[HDR_SHAPE]) & LOW32,
        int(header_words[HDR_SHAPE]) >> 32,
    )
    cf = int(header_words[HDR_CAPACITY_FLAGS])
    capacity, flags = cf & LOW32, (cf >> 32) & LOW32
    ctrl = int(header_words[HDR_SLOTS])
    last = (ctrl >> 32) & LOW32
    slot = min(ctrl & LOW32, last + 1)
    stride = lane_stride_words(capacity)
    slot_words = (num_blocks * num_groups * stride + HEADER_WORDS) & u64
    offset = (slot * slot_words) & u64
    block, group = block & LOW32, group & LOW32
    if not (block < num_blocks and group < num_groups and slot <= last):
        return offset, 0, LOW32
    lane = block * num_groups + group
    offset = (offset + lane * stride + LANE_HEADER_WORDS) & u64
    ring = flags & FLAG_RING and capacity != 0
    return offset, capacity, (capacity - 1) if ring else LOW32


def split_slots(words: np.ndarray) -> tuple[list[np.ndarray], int]:
    """(one plain buffer's words per used slot, launches that found no slot) of `words`, a
    slotted buffer or a plain one (one slot). Slots [0, w3.lo32) are used; the next one too when
    it holds anything (a launch whose slot step has not run), and slot 0 always. Each slot's
    w3 is cleared: the
    control word belongs to the whole buffer. Structural checks are Layout.from_header's."""
    if words.size < HEADER_WORDS or header_version(words) < VERSION_SLOTS:
        return [words], 0
    nb, ng = int(words[HDR_SHAPE]) & LOW32, int(words[HDR_SHAPE]) >> 32
    cap = int(words[HDR_CAPACITY_FLAGS]) & LOW32
    ctrl = int(words[HDR_SLOTS])
    used, num_slots = ctrl & LOW32, (ctrl >> 32) + 1
    if not (nb <= MAX_BLOCKS and ng <= MAX_GROUPS and cap <= MAX_CAPACITY):
        Layout.from_header(words)  # raises, naming the impossible field
    plain = buffer_words(nb, ng, cap)
    if ctrl == 0 and words.size == plain:
        return [words], 0  # a plain buffer
    if words.size != slotted_words(plain, num_slots):
        from ..errors import FormatError

        raise FormatError(
            f"buffer holds {words.size} words but its header names {num_slots} slots of {plain} "
            f"words (+{HEADER_WORDS}): {slotted_words(plain, num_slots)}; truncated or not a whole "
            "slotted buffer"
        )
    slots = [words[k * plain : (k + 1) * plain].copy() for k in range(num_slots)]
    for w in slots:
        w[HDR_SLOTS] = 0
    keep = min(used, num_slots)
    if keep < num_slots and (keep == 0 or slots[keep][HEADER_WORDS:].any()):
        keep += 1  # slot 0 always: a buffer nothing ran into reads as one empty launch
    return slots[:keep], max(0, used - num_slots)


def encode_header(num_blocks: int, num_groups: int, capacity: int, flags: int = 0) -> np.ndarray:
    """The HEADER_WORDS words a fresh buffer starts with."""
    hdr = np.zeros(HEADER_WORDS, dtype=np.uint64)
    hdr[HDR_MAGIC_VERSION] = MAGIC | (VERSION << 32)
    hdr[HDR_SHAPE] = num_blocks | (num_groups << 32)
    hdr[HDR_CAPACITY_FLAGS] = capacity | (flags << 32)
    return hdr


def lane_dtype(capacity: int) -> np.dtype:
    """A numpy structured dtype for one lane: view the lane area as an array of these."""
    return np.dtype([("anchor", "<u8"), ("sm_attempted", "<u8"), ("records", "<u8", (capacity,))])


def header_version(words: np.ndarray) -> int:
    """The format version a buffer's header names (validated by Layout.from_header)."""
    return int(words[HDR_MAGIC_VERSION]) >> 32


class Layout:
    """Shape of one buffer and all the size arithmetic that follows from it.

    Build one with :meth:`checked` (user input: raises ConfigError) or :meth:`from_header`
    (bytes from a device or a file: raises FormatError).
    """

    __slots__ = ("num_blocks", "num_groups", "capacity", "flags")

    def __init__(self, num_blocks: int, num_groups: int, capacity: int, flags: int = 0):
        self.num_blocks = int(num_blocks)
        self.num_groups = int(num_groups)
        self.capacity = int(capacity)
        self.flags = int(flags)

    @classmethod
    def checked(cls, num_blocks, num_groups, capacity, flags: int = 0) -> Layout:
        from ..errors import ConfigError

        for name, value, limit in (
            ("num_blocks", num_blocks, MAX_BLOCKS),
            ("num_groups", num_groups, MAX_GROUPS),
            ("max_events_per_group", capacity, MAX_CAPACITY),
        ):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise ConfigError(f"{name} must be an int, got {type(value).__name__} {value!r}")
            if value <= 0:
                raise ConfigError(f"{name} must be positive, got {value}")
            if value > limit:
                raise ConfigError(f"{name}={value} is larger than the supported {limit}; lower it")
        layout = cls(num_blocks, num_groups, capacity, flags)
        if flags & FLAG_RING and capacity & (capacity - 1):
            lo = 1 << (capacity.bit_length() - 1)
            raise ConfigError(
                f"ring mode needs max_events_per_group to be a power of two (the device wraps "
                f"with a mask), got {capacity}; use {lo} or {lo * 2}"
            )
        if layout.total_bytes > MAX_BUFFER_BYTES:
            raise ConfigError(
                f"the buffer would need {layout.total_bytes / 2**30:.1f} GiB "
                f"({num_blocks} blocks x {num_groups} groups x {capacity} records x 8 B); "
                f"the limit is {MAX_BUFFER_BYTES >> 30} GiB: lower max_events_per_group or num_blocks"
            )
        return layout

    @classmethod
    def from_header(cls, words: np.ndarray, size: int | None = None) -> Layout:
        """Parse and validate the header of `words` (a uint64 array holding a whole buffer).

        `size`: the words of the whole buffer when `words` holds only its start (a file reader
        checks the size before reading the rest).
        """
        from ..errors import FormatError

        size = words.size if size is None else size
        if min(size, words.size) < HEADER_WORDS:
            raise FormatError(
                f"buffer too short: {size} words, a header alone is {HEADER_WORDS} words"
            )
        mv = int(words[HDR_MAGIC_VERSION])
        magic, version = mv & LOW32, header_version(words)
        if magic != MAGIC:
            raise FormatError(
                f"not an sm_profiler buffer: magic 0x{magic:08x}, expected 0x{MAGIC:08x}; "
                "pass the tensor returned by SmProfiler.get_buffer()"
            )
        if version not in READABLE_VERSIONS:
            raise FormatError(
                f"buffer has format version {version}; this sm_profiler reads versions "
                f"{', '.join(map(str, READABLE_VERSIONS))}"
            )
        shape = int(words[HDR_SHAPE])
        cf = int(words[HDR_CAPACITY_FLAGS])
        nb, ng, cap, flags = shape & LOW32, shape >> 32, cf & LOW32, cf >> 32
        if not (0 < nb <= MAX_BLOCKS and 0 < ng <= MAX_GROUPS and 0 < cap <= MAX_CAPACITY):
            raise FormatError(
                f"impossible header: num_blocks={nb}, num_groups={ng}, capacity={cap}"
            )
        if flags & ~KNOWN_FLAGS:
            raise FormatError(
                f"header flags 0x{flags:x} set bits this sm_profiler does not know "
                f"(known: 0x{KNOWN_FLAGS:x}): corrupt buffer or a newer writer"
            )
        if flags & FLAG_RING and cap & (cap - 1):
            raise FormatError(
                f"ring buffer with capacity {cap}, not a power of two: corrupt header"
            )
        end = HDR_SCRATCH if version >= 2 else HEADER_WORDS
        first = HDR_LABEL + 1 if version >= VERSION_SLOTS else HDR_CAPACITY_FLAGS + 1
        reserved = np.flatnonzero(words[first:end])
        if len(reserved):
            i = first + int(reserved[0])
            raise FormatError(
                f"header word {i} is reserved and must be zero, got 0x{int(words[i]):x}: "
                "corrupt buffer or a newer writer"
            )
        layout = cls(nb, ng, cap, flags)
        if size != layout.total_words:
            raise FormatError(
                f"buffer holds {size} words but its header ({nb} blocks x {ng} groups x "
                f"{cap} records) needs {layout.total_words}: truncated or not a whole buffer"
            )
        return layout

    @property
    def num_lanes(self) -> int:
        return self.num_blocks * self.num_groups

    @property
    def lane_words(self) -> int:
        return lane_stride_words(self.capacity)

    @property
    def total_words(self) -> int:
        return buffer_words(self.num_blocks, self.num_groups, self.capacity)

    @property
    def total_bytes(self) -> int:
        return self.total_words * WORD_BYTES

    @property
    def emulated(self) -> bool:
        return bool(self.flags & FLAG_EMULATED)

    @property
    def ring(self) -> bool:
        return bool(self.flags & FLAG_RING)

    def header(self) -> np.ndarray:
        return encode_header(self.num_blocks, self.num_groups, self.capacity, self.flags)

    def lanes(self, words: np.ndarray) -> np.ndarray:
        """The lane area of `words` as a (num_lanes,) structured array (a view, no copy)."""
        return words[HEADER_WORDS:].view(lane_dtype(self.capacity))

    def __eq__(self, other) -> bool:
        return isinstance(other, Layout) and all(
            getattr(self, s) == getattr(other, s) for s in self.__slots__
        )

    def __repr__(self) -> str:
        return (
            f"Layout(num_blocks={self.num_blocks}, num_groups={self.num_groups}, "
            f"capacity={self.capacity}, flags={self.flags})"
        )


# Under Triton's CPU interpreter there is no %smid: programs are spread over this many
# emulated SMs (program id modulo), and the host clock stands in for %globaltimer.
EMULATED_SM_COUNT = 8


# -- auto mode ------------------------------------------------------------------------------
# The buffer of `sm_profiler.auto` (kernels instrumented by the compiler, no source change) is a
# table of program records, not lanes: kernels of any grid share it. Where a launch's records go is
# the host's choice, made at the launch: Triton passes every kernel a "profile scratch" pointer
# (its last parameter) and asks an allocator for it, grid x profile_scratch_size bytes, at each
# launch; auto mode sets that size to one record per program (per warp at level="warp") and its
# allocator hands out the next *area* of the GPU's record slots, or no pointer (record nothing).
# A program writes its record at area + its linear program id, naming its kernel by a tag fixed at
# compile time: no atomic and no load (a claim's round trip, and a word read at the start, were
# what a recorded short launch paid: BENCHMARKS.md). A CUDA graph's kernels keep the areas they
# were captured with (switched to null for replays not recorded); each recorded replay is copied
# into a new area (in stream order: staged on the device, then up to 16 replays at a time by the
# host; auto_mode/graph_stage.py), so every recorded replay has its own.
# The device writes only records; the host keeps each area's (first slot, slots, step, tag) and,
# when it reads the buffer back, puts them in front. Little-endian words, as read back::
#
#     word 0..7      header (AUTO_HEADER_WORDS)
#       a0 = AUTO_MAGIC (low 32) | AUTO_VERSION (high 32)
#       a1 = areas A: the launches (and replays) whose records are kept
#       a2 = record slots S (low 32) | AUTO_RING (bit 32: the newest areas were kept, else the
#            first ones, until one did not fit)
#       a3 = claimed: records asked for while recording (a program's, or warp's, each), kept
#            or not; the kept are the areas' slots, so claimed - kept were dropped, exactly
#       a4..a7 reserved, zero
#     then A area descriptors of AUTO_AREA_WORDS (2) words, in the order they were handed out:
#       d0 = first slot (low 32) | slots (high 32)
#       d1 = step tag bits 0..15 (bits 0..15) | tag (bits 16..23: AutoProfiler.set_tag's;
#            0 = none) | zero (24..31) | step tag bits 16..47 (bits 32..63). The step tag numbers
#            the recorded steps 1, 2, 3, ... (0 = none) and is never reused; the session's
#            step_tags maps it to the step
#     then S records of AUTO_RECORD_BYTES (32) (slots no area holds are left as they were),
#       each 32-bit fields:
#       f0, f1  start: the full 64-bit %globaltimer when the program (or warp) began
#       f2      end: the low 32 bits of %globaltimer at its `ret` (the end is the first time after
#               the start with these low bits: programs are far shorter than 4.29 s)
#       f3      %smid (bits 0..15) | zero
#       f4      the kernel's tag (ptx.auto_kernel_tag: 32 bits of Triton's cache hash of the
#               kernel, never 0; the host maps tags to the kernels it loaded)
#       f5      zero (bits 0..15) | warp index (bits 16..22) | AUTO_PER_WARP (bit 23) | zero
#       f6      %ctaid.x
#       f7      %ctaid.y (bits 0..15) | %ctaid.z (bits 16..31)
#
# A program (warp) of a launch writes slot first + its linear id ((z * ny + y) * nx + x, times
# the warps per program plus the warp at level="warp"). A record is written with two 16-byte
# stores when its program ends; a slot of an area whose f4 is zero was never written (a program
# killed).
AUTO_MAGIC = 0x41504D53  # b"SMPA"
AUTO_VERSION = 6  # 6: step tags of 48 bits (5: 16 bits, reused)
AUTO_HEADER_WORDS = 8
AUTO_HDR_AREAS = 1
AUTO_HDR_SLOTS = 2
AUTO_HDR_CLAIMED = 3
AUTO_AREA_WORDS = 2
AUTO_RECORD_BYTES = 32
AUTO_RECORD_WORDS = AUTO_RECORD_BYTES // WORD_BYTES
AUTO_RECORD_SHIFT = 5  # slot << AUTO_RECORD_SHIFT = its byte offset in the slots
assert 1 << AUTO_RECORD_SHIFT == AUTO_RECORD_BYTES
AUTO_SLOTS_MASK = LOW32
AUTO_RING = 1 << 32
AUTO_MAX_TAG = 255
AUTO_MAX_STEP_TAG = (1 << 48) - 1
AUTO_TAG_SHIFT = 16  # of an area's d1
AUTO_PER_WARP = 1 << 23
AUTO_MAX_WARP = 0x7F  # a record's warp index: bits 16..22 of f5
AUTO_KERNEL_BITS = 16
AUTO_MAX_KERNELS = (1 << AUTO_KERNEL_BITS) - 1  # id 0 is never given: an unwritten slot reads 0
AUTO_MIN_CAPACITY = 1
AUTO_MAX_CAPACITY = 1 << 31
AUTO_RECORD_DTYPE = np.dtype(
    [
        ("start_ns", "<u8"),
        ("end_lo", "<u4"),
        ("sm", "<u4"),
        ("kernel_tag", "<u4"),
        ("info", "<u4"),
        ("ctaid_x", "<u4"),
        ("ctaid_yz", "<u4"),
    ]
)


def auto_capacity_problem(capacity) -> str | None:
    """Why `capacity` (record slots per GPU) cannot size an auto buffer, or None."""
    if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)):
        return f"must be an int (records per GPU), got {capacity!r}"
    if not AUTO_MIN_CAPACITY <= capacity <= AUTO_MAX_CAPACITY:
        return (
            f"must be in {AUTO_MIN_CAPACITY:,}..{AUTO_MAX_CAPACITY:,} records per GPU, "
            f"got {capacity:,}"
        )
    return None


def auto_area(first: int, slots: int, step: int = 0, tag: int = 0) -> tuple[int, int]:
    """The two descriptor words of an area of `slots` records from slot `first`."""
    for what, v, top in (("tag", tag, AUTO_MAX_TAG), ("step tag", step, AUTO_MAX_STEP_TAG)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v <= top:
            raise ConfigError(f"auto {what} must be an int in 0..{top}, got {v!r}")
    return int(first) | (int(slots) << 32), auto_label(int(step), int(tag))


def auto_label(step, tag):
    """An area's d1 word(s) of step tag(s) and tag(s) (ints or uint64 arrays)."""
    if isinstance(step, np.ndarray) or isinstance(tag, np.ndarray):
        step, tag = np.asarray(step, np.uint64), np.asarray(tag, np.uint64)
        low, high = step & np.uint64(0xFFFF), (step >> np.uint64(16)) << np.uint64(32)
        return low | (tag << np.uint64(AUTO_TAG_SHIFT)) | high
    return (step & 0xFFFF) | (tag << AUTO_TAG_SHIFT) | ((step >> 16) << 32)


def auto_label_parts(d1: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(step tag, tag, bits that must be zero) of areas' d1 words (auto_label's inverse)."""
    d1 = np.asarray(d1, np.uint64)
    step = (d1 & np.uint64(0xFFFF)) | ((d1 >> np.uint64(32)) << np.uint64(16))
    tag = (d1 >> np.uint64(AUTO_TAG_SHIFT)) & np.uint64(0xFF)
    return step, tag, (d1 >> np.uint64(AUTO_TAG_SHIFT + 8)) & np.uint64(0xFF)


def auto_header(slots: int, ring: bool, areas: int, claimed: int) -> np.ndarray:
    """The AUTO_HEADER_WORDS words of an auto buffer read back: `slots` record slots, `areas`
    area descriptors after the header, `claimed` records asked for."""
    problem = auto_capacity_problem(slots)
    if problem:
        raise ConfigError(f"auto capacity {problem}")
    hdr = np.zeros(AUTO_HEADER_WORDS, dtype=np.uint64)
    hdr[0] = AUTO_MAGIC | (AUTO_VERSION << 32)
    hdr[AUTO_HDR_AREAS] = areas
    hdr[AUTO_HDR_SLOTS] = int(slots) | (AUTO_RING if ring else 0)
    hdr[AUTO_HDR_CLAIMED] = claimed
    return hdr


def auto_words(areas: int, slots: int) -> int:
    """Words of an auto buffer read back with `areas` areas and `slots` record slots."""
    return AUTO_HEADER_WORDS + areas * AUTO_AREA_WORDS + slots * AUTO_RECORD_WORDS
