// The fidosim command: its subcommands are FidosimCommands' (where the Swift tests parse and check them).
import FidosimCommands

Fidosim.runFromCommandLine()
