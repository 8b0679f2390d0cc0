from clarke.cli import main

main()
