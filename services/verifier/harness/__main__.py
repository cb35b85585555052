import sys

from services.verifier.harness.main import main

sys.exit(main())
