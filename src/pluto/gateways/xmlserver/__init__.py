"""xmlServer: a gateway that lets programs in any language use the bus through small XML documents over TCP.

A client connects (to 127.0.0.1:7650 by default), reads the server's ``<hello>``, and sends requests, one XML
document per line; the server answers each with one document per line and streams the updates of subscriptions
in between. The framing, the documents and the limits are described in :mod:`.codec`, :mod:`.events` and
:mod:`.mapping`; the XSD (:data:`.schema.SCHEMA_PATH`) is generated from the message definitions.

- :mod:`.codec`: the sans-I/O codec (bytes <-> events), for either side of a connection.
- :mod:`.server`: the asyncio server in front of the bus, and its defences (a token before anything else, range
  checks of what is written, connection caps, an idle timeout, a back-off after wrong tokens, a log that a flood
  cannot fill; :mod:`pluto.gateways.guard` keeps the books of the last two); its parts: :mod:`.settings` (what it
  allows, what it counts), :mod:`.sessions` (the connections), :mod:`.requests` (what each request does) and
  :mod:`.subscriptions` (the topics and their pacing); :mod:`.module`: the ``xmlserver`` module, and where the
  token comes from (a file or ``PLUTO_XML_TOKEN``, never the command line).
"""

from .codec import XmlCodec, encode_event, parse_document
from .events import NEED_DATA, ErrorCode
from .module import XmlServerModule, XmlServerParams
from .schema import SCHEMA_PATH, xsd_text
from .server import ServerSettings, ServerStats, XmlServer

__all__ = [
    "NEED_DATA",
    "SCHEMA_PATH",
    "ErrorCode",
    "ServerSettings",
    "ServerStats",
    "XmlCodec",
    "XmlServer",
    "XmlServerModule",
    "XmlServerParams",
    "encode_event",
    "parse_document",
    "xsd_text",
]
