from odradek.cli.kafka.tools import main

main()
