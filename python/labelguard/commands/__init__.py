"""The registry of `labelguard` subcommands (memray's pattern): one module per subcommand, each
with NAME (the word on the command line), USAGE (its lines of `labelguard --help`) and
main(argv) -> exit status, where argv is what follows the subcommand's name. A command ends
early by raising commands._common.Fail(code, message lines...). cli.main dispatches on NAME.

To add a subcommand: a module here with those three names, listed in COMMANDS below.
Tested by tests/cli/test_*.sh through scripts/labelguard.
"""
from labelguard.commands import attach, audit, demo, doctor, report, run

COMMANDS = {m.NAME: m for m in (run, report, doctor, audit, attach, demo)}
