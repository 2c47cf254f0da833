import pytest

from fidosim import NotFoundError


@pytest.mark.fidosim(profile="yubikey5", presence="deny")
def test_a_key_with_the_standard_library_only(fidosim_key):
    status = fidosim_key.control.status()
    assert status["info"]["aaguid"] and status["presence"].startswith("deny")
    with pytest.raises(NotFoundError):
        fidosim_key.control.remove_credential(b"no such credential")
