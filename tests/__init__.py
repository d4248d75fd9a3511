"""The tests, in folders that mirror what they test: tests/model/ for model/, tests/engine/run/proxy/
for engine/run/proxy/, tests/experiments/transition/ for experiments/transition/, tests/docs/ for
docs/ (and so on). Apart: tests/adversarial/ (the engine attacked through its front door),
tests/support/ (helpers the tests share: never a test file), tests/fixtures/ (stored data), and
at the top the checks of the whole tree (layout, type ignores, the wheel, core-only imports,
the public API: tests/test_test_tree.py WHOLE_TREE).
tests/test_test_tree.py holds the tree to this."""
