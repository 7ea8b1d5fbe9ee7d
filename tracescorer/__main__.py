from tracescorer.cli import main

main()
