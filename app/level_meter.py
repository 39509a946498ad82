"""A small horizontal input level meter (dBFS), so users see that the microphone hears them."""

from __future__ import annotations

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPaintEvent
from PySide6.QtWidgets import QSizePolicy, QWidget

FLOOR_DB = -60.0


class LevelMeter(QWidget):
    """Shows ``set_level(db)`` as a bar from -60 dBFS (empty) to 0 dBFS (full); green, amber, red."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("levelMeter")
        self._db = FLOOR_DB
        self.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        self.set_name("Input level")

    def set_name(self, name: str) -> None:
        """What the meter measures ("Input level", "Microphone level"): its accessible name and tooltip."""
        self.setAccessibleName(name)
        self.setToolTip(name)

    def sizeHint(self) -> QSize:
        return QSize(80, 12)

    @property
    def level_db(self) -> float:
        return self._db

    def set_level(self, db: float) -> None:
        """The current level in dBFS (values below -60 show as empty)."""
        db = max(FLOOR_DB, min(0.0, float(db)))
        if abs(db - self._db) >= 0.5:
            self._db = db
            self.setToolTip(f"{self.accessibleName()} {db:.0f} dBFS")
            self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        rect = QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5)
        p.setPen(self.palette().mid().color())
        p.setBrush(self.palette().base())
        p.drawRoundedRect(rect, 3, 3)
        fraction = (self._db - FLOOR_DB) / -FLOOR_DB
        if fraction > 0:
            color = QColor("#2e9d4f") if self._db < -12 else QColor("#d99a1e") if self._db < -3 else QColor("#d13b3b")
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(color)
            bar = rect.adjusted(1.5, 1.5, -1.5, -1.5)
            bar.setWidth(bar.width() * fraction)
            p.drawRoundedRect(bar, 2, 2)
        p.end()
