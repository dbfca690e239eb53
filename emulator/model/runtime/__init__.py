"""The PTC runtime every model plays programs with: starting a program, checking, running and
replaying it in the sandbox, and answering the calls that run on the server's side."""
