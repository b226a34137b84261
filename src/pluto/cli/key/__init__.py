"""``pluto key PAGE``: keyboard interfaces to the modules (the original's ``xxx_i`` programs), one page per module.

The pure parts, tested without a terminal: :mod:`.keymap` (which key does what on each page, and the typed values
a command asks for), :mod:`.teleop` (the dead-man rule of the movement keys) and :mod:`.status` (a module's status
in words). :mod:`.links` binds a page's actions to the module's proxy; :mod:`.app` is the Textual program.
"""
