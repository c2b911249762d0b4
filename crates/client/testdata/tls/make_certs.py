"""Makes the throwaway TLS test certificates (run in this folder; needs `cryptography`)."""
import datetime
import ipaddress

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Valid from well before any machine's clock to well after: tests never see an expired
# or not-yet-valid certificate.
START = datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc)
END = datetime.datetime(2120, 1, 1, tzinfo=datetime.timezone.utc)


def name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


ca_key = ec.generate_private_key(ec.SECP256R1())
ca = (
    x509.CertificateBuilder()
    .subject_name(name("servebench test CA (throwaway)"))
    .issuer_name(name("servebench test CA (throwaway)"))
    .public_key(ca_key.public_key())
    .serial_number(x509.random_serial_number())
    .not_valid_before(START)
    .not_valid_after(END)
    .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
    .add_extension(
        x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
    )
    .sign(ca_key, hashes.SHA256())
)
leaf_key = ec.generate_private_key(ec.SECP256R1())
sans = [
    x509.DNSName("localhost"),
    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
    x509.IPAddress(ipaddress.ip_address("::1")),
]
leaf = (
    x509.CertificateBuilder()
    .subject_name(name("localhost"))
    .issuer_name(ca.subject)
    .public_key(leaf_key.public_key())
    .serial_number(x509.random_serial_number())
    .not_valid_before(START)
    .not_valid_after(END)
    .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
    .add_extension(
        x509.KeyUsage(True, False, False, False, False, False, False, False, False), critical=True
    )
    .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    .add_extension(x509.SubjectAlternativeName(sans), critical=False)
    .sign(ca_key, hashes.SHA256())
)
open("ca.pem", "wb").write(ca.public_bytes(serialization.Encoding.PEM))
open("localhost.pem", "wb").write(leaf.public_bytes(serialization.Encoding.PEM))
open("localhost.key", "wb").write(
    leaf_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
)
