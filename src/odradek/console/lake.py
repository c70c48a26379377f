"""The lake pages: the pipeline's Iceberg catalog read through pyiceberg, with the same
views as `odradek lake tables | describe | history | search`."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from odradek.console.admin import ConsoleError


class Lake:
    """Opens the catalog on first use; a missing catalog or pyiceberg is one line."""

    def __init__(self, catalog_uri: str | None, warehouse: str | None) -> None:
        self.catalog_uri = catalog_uri
        self.warehouse = warehouse
        self._catalog: Any = None
        self._lock = threading.Lock()

    def catalog(self) -> Any:
        if not self.catalog_uri:
            raise ConsoleError("no lake catalog configured (--lake-catalog-uri)")
        with self._lock:
            if self._catalog is None:
                try:
                    from odradek.pipeline.lake_catalog import LakeConfig, open_catalog
                except ImportError:
                    raise ConsoleError("the lake pages need pyiceberg "
                                       "(pip install 'odradek[pipeline]')") from None
                uri = self.catalog_uri
                if uri.startswith("sqlite:///") and not Path(uri[len("sqlite:///"):]).exists():
                    raise ConsoleError(f"no lake catalog at {uri} yet: start the pipeline "
                                       "(odradek up or odradek lake ingest)")
                warehouse = self.warehouse or _default_warehouse(uri)
                self._catalog = open_catalog(LakeConfig(uri, warehouse))
            return self._catalog

    def tables(self, term: str = "") -> tuple[list[Any], list[dict[str, str]]]:
        from odradek.pipeline.catalog_tools import all_tables, search, summarize

        catalog = self.catalog()
        try:
            rows = [summarize(catalog, name) for name in all_tables(catalog)]
            hits = search(catalog, term) if term else []
        except Exception as e:  # sqlalchemy or pyiceberg errors: the catalog is unreadable
            raise ConsoleError(f"reading the catalog {self.catalog_uri}: {e}") from None
        return rows, hits

    def table(self, name: str) -> tuple[Any, list[dict[str, Any]]]:
        from pyiceberg.exceptions import NoSuchTableError

        from odradek.pipeline.catalog_tools import describe, history

        catalog = self.catalog()
        try:
            return describe(catalog, name), list(reversed(history(catalog, name)))
        except NoSuchTableError:
            raise ConsoleError(f"table {name} is not in the catalog") from None
        except ValueError as e:  # pyiceberg: an identifier it cannot parse
            raise ConsoleError(f"table {name}: {e}") from None


def _default_warehouse(uri: str) -> str:
    """Beside a SQLite catalog, as LakeConfig.local lays it out."""
    if uri.startswith("sqlite:///"):
        return (Path(uri[len("sqlite:///"):]).parent / "warehouse").resolve().as_uri()
    return Path("warehouse").resolve().as_uri()
