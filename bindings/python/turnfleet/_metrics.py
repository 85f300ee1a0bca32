"""Prometheus text exposition: write and parse (``metrics.h``)."""

from dataclasses import dataclass

from . import core as _c
from ._errors import InvalidArgument
from ._handle import Handle, locked

#: metric family types (``tf_metric_type``) by name
_TYPES = {
    "untyped": _c.TF_METRIC_UNTYPED,
    "counter": _c.TF_METRIC_COUNTER,
    "gauge": _c.TF_METRIC_GAUGE,
    "histogram": _c.TF_METRIC_HISTOGRAM,
    "summary": _c.TF_METRIC_SUMMARY,
}
_NAMES = {v: k for k, v in _TYPES.items()}


@dataclass(frozen=True)
class Sample:
    """One sample: its metric name, value, and labels (a plain dict)."""

    name: str
    value: float
    labels: dict


class Metrics(Handle):
    """A set of metric families and samples (``tf_metrics``): built with
    :meth:`declare` and :meth:`add` then written with :meth:`to_text`, or read
    from a scrape with :meth:`parse`."""

    __slots__ = ("_labels", "_wanted")

    def __init__(self, h=None, labels=()):
        super().__init__(h if h is not None else _c.tf_metrics_new())
        # the C API reads a label by name: the names given to add(), per sample, and
        # for a parsed scrape the names asked for
        self._labels = []
        self._wanted = tuple(labels)

    @classmethod
    def parse(cls, text, labels=()):
        """Parse Prometheus text (str or bytes-like); ``labels``: the label names
        :attr:`samples` reports for each sample (the text does not declare them)."""
        return cls(_c.tf_metrics_parse(text), labels)

    @locked
    def declare(self, name, type, help=""):
        """Declare a family: ``type`` is "counter", "gauge", "histogram", "summary" or "untyped"."""
        if type not in _TYPES:
            raise InvalidArgument(f"type must be one of {', '.join(_TYPES)}, not {type!r}", _c.TF_EINVALID)
        _c.tf_metrics_declare(self._handle, name, _TYPES[type], help)

    @locked
    def add(self, name, value, labels=None):
        """Add a sample of a declared family; ``labels``: a dict of label name -> value."""
        items = list((labels or {}).items())
        names = [str(k) for k, _ in items]
        values = [str(v) for _, v in items]
        _c.tf_py_metrics_add(self._handle, name, names, values, float(value))
        self._labels.append(names)

    @locked
    def to_text(self):
        """The exposition text (``tf_metrics_to_text``)."""
        return _c.tf_metrics_to_text(self._handle)

    @locked
    def __len__(self):
        return _c.tf_metrics_sample_count(self._handle)

    @property
    @locked
    def samples(self):
        """Every sample, in order, as :class:`Sample` (labels: those given to add(),
        or for a parsed scrape those named in ``parse(labels=...)``)."""
        h = self._handle
        out = []
        for i in range(_c.tf_metrics_sample_count(h)):
            name, value = _c.tf_metrics_sample(h, i)
            wanted = self._labels[i] if i < len(self._labels) else self._wanted
            labels = {}
            for label in wanted:
                v = _c.tf_metrics_sample_label(h, i, label)
                if v is not None:
                    labels[label] = v
            out.append(Sample(name, value, labels))
        return out

    @locked
    def label(self, i, name):
        """The value of label ``name`` of sample ``i``, or None."""
        return _c.tf_metrics_sample_label(self._handle, int(i), name)

    @locked
    def type_of(self, name):
        """The declared type of a family ("counter", "gauge", ...), or None."""
        return _NAMES.get(_c.tf_metrics_family_type(self._handle, name))

    @locked
    def sum(self, name):
        """The sum of every sample of metric ``name`` (NotFound when there is none)."""
        return _c.tf_metrics_sum(self._handle, name)

    def __repr__(self):
        return "<turnfleet.Metrics closed>" if self.closed else f"<turnfleet.Metrics {len(self)} samples>"


def parse_metrics(text, labels=()):
    """Parse a Prometheus scrape (coturn's ``/metrics``): see :meth:`Metrics.parse`."""
    return Metrics.parse(text, labels)
