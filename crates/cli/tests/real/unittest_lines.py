# Runs the unittest suite under ROOT/tests (top level ROOT), as
# `python -m unittest discover -s tests -t .` would, and prints one line per
# event, tab separated, flushed as it happens (so that a run cut short
# still says which case was running):
#   start   TEST_ID
#   passed|failed|error|skipped|xfail|xpass   TEST_ID   DETAIL
#   done
# DETAIL (a traceback or a skip reason) has its newlines escaped as \n.
import sys
import unittest


class Lines(unittest.TestResult):
    def _out(self, kind, test, detail=""):
        detail = detail.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", " ")
        print(f"{kind}\t{test.id()}\t{detail}", flush=True)

    def startTest(self, test):
        print(f"start\t{test.id()}", flush=True)
        super().startTest(test)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._out("passed", test)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._out("failed", test, self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._out("error", test, self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._out("skipped", test, reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._out("xfail", test)

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._out("xpass", test)

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            self._out("failed", subtest, self._exc_info_to_string(err, test))


root = sys.argv[1]
suite = unittest.defaultTestLoader.discover(start_dir=root + "/tests", top_level_dir=root)
suite.run(Lines())
print("done", flush=True)
