from fp4doctor.cli import main

main()
