from rivven_kproto.cli.main import main

main()
