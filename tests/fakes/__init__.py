"""Stand-ins for what the tests cannot run here, each named as such: the fake Unreal editor
(``tests.fakes.unreal``) and the stand-in render engine of the scheduling tests
(``tests.fakes.engine_standin``). Production code never imports this package."""
